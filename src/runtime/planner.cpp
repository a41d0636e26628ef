#include "runtime/planner.h"

#include <algorithm>

#include "runtime/block_allocator.h"

namespace kiln {
namespace {

// Ops whose kernels compute each element of dst from the same element of their sources only, so
// dst may be the memory of a source of the same layout (ops/op.h kernels are written for that).
// Returns how many leading sources may donate their memory (0: none).
int inplace_sources(OpKind kind) {
  switch (kind) {
    case OpKind::Add:
    case OpKind::Mul:
    case OpKind::Scale:
    case OpKind::Silu:
    case OpKind::Gelu:
    case OpKind::GeluQuick:
    case OpKind::GeluErf:
    case OpKind::Tanh:
    case OpKind::Relu:
      return 1;
    case OpKind::SwiGlu:
      return 2;
    default:
      return 0;
  }
}

size_t own_bytes(const GraphTensor& t) { return t.view.span_bytes(); }

}  // namespace

Result<MemoryPlan> plan_memory(const Graph& graph, const PlannerOptions& options) {
  if (!graph.status().ok()) return graph.status().error();
  const std::vector<GraphTensor>& ts = graph.tensors();
  const std::vector<int32_t>& ops = graph.op_nodes();
  const size_t n = ts.size();
  const int64_t kForever = static_cast<int64_t>(ops.size());
  auto at = [&](int32_t id) -> const GraphTensor& { return ts[static_cast<size_t>(id)]; };
  auto owns_arena_memory = [&](int32_t id) { return at(id).role == TensorRole::Op && at(id).storage == id; };

  MemoryPlan mp;
  mp.offset.assign(n, kNotInArena);
  mp.inplace_of.assign(n, -1);
  mp.kernels.reserve(ops.size());

  // Last op position that touches each storage tensor (reads through any view, or writes into it).
  std::vector<int64_t> last_use(n, -1);
  for (size_t pos = 0; pos < ops.size(); ++pos) {
    const GraphTensor& t = at(ops[pos]);
    const int64_t p = static_cast<int64_t>(pos);
    for (int i = 0; i < t.n_src; ++i) {
      const int32_t root = at(t.src[static_cast<size_t>(i)]).storage;
      last_use[static_cast<size_t>(root)] = std::max(last_use[static_cast<size_t>(root)], p);
    }
    last_use[static_cast<size_t>(t.storage)] = std::max(last_use[static_cast<size_t>(t.storage)], p);
  }
  for (size_t id = 0; id < n; ++id) {
    if (ts[id].output) last_use[static_cast<size_t>(ts[id].storage)] = kForever;
  }

  BlockAllocator alloc(BlockAllocator::kUnbounded, options.alignment);
  std::vector<size_t> block_request(n, 0);  // bytes passed to alloc for each block owner
  std::vector<bool> released(n, false);     // block freed or handed to an in-place result
  for (size_t pos = 0; pos < ops.size(); ++pos) {
    const int32_t id = ops[pos];
    const GraphTensor& t = at(id);
    const int64_t p = static_cast<int64_t>(pos);
    const KernelPlan kp = plan_kernel(graph.shape_call(id));
    KILN_ASSERT(kp.n_phases >= 1 && kp.n_phases <= 2, "planner: kernel plan with an unsupported phase count");
    mp.scratch_bytes = std::max(mp.scratch_bytes, kp.scratch_bytes);
    mp.kernels.push_back(kp);

    if (owns_arena_memory(id)) {
      const size_t bytes = own_bytes(t);
      mp.naive_bytes += alloc.block_size(bytes);
      int32_t donor = -1;
      for (int k = 0; options.reuse && donor < 0 && k < std::min(inplace_sources(t.op), t.n_src); ++k) {
        const int32_t s = t.src[static_cast<size_t>(k)];
        if (!owns_arena_memory(s) || last_use[static_cast<size_t>(s)] != p) continue;
        if (at(s).view.type != t.view.type || at(s).view.ne != t.view.ne || own_bytes(at(s)) != bytes)
          continue;
        bool shared = false;
        for (int j = 0; j < t.n_src; ++j) {
          if (j != k && at(t.src[static_cast<size_t>(j)]).storage == s) shared = true;
        }
        if (!shared) donor = s;
      }
      if (donor >= 0) {
        mp.offset[static_cast<size_t>(id)] = mp.offset[static_cast<size_t>(donor)];
        block_request[static_cast<size_t>(id)] = block_request[static_cast<size_t>(donor)];
        released[static_cast<size_t>(donor)] = true;
        mp.inplace_of[static_cast<size_t>(id)] = donor;
      } else {
        const std::optional<size_t> off = alloc.allocate(bytes);
        KILN_ASSERT(off.has_value(), "planner: unbounded allocator refused a block");
        mp.offset[static_cast<size_t>(id)] = *off;
        block_request[static_cast<size_t>(id)] = bytes;
      }
    }
    if (!options.reuse) continue;
    // Blocks whose last reader (or writer) is this node return to the free list.
    auto release_if_dead = [&](int32_t root) {
      const size_t r = static_cast<size_t>(root);
      if (!owns_arena_memory(root) || released[r] || last_use[r] != p) return;
      alloc.free(mp.offset[r], block_request[r]);
      released[r] = true;
    };
    for (int i = 0; i < t.n_src; ++i) release_if_dead(at(t.src[static_cast<size_t>(i)]).storage);
    release_if_dead(t.storage);
  }
  mp.arena_bytes = alloc.high_water();
  return mp;
}

PlannerOptions ComputeArena::options() const {
  PlannerOptions o;
  o.alignment = arena_alignment(*device_);
  return o;
}

Result<size_t> ComputeArena::reserve(const Graph& graph) {
  KILN_ASSIGN_OR_RETURN(MemoryPlan mp, plan_memory(graph, options()));
  reserved_ = std::max(reserved_, mp.arena_bytes);
  return mp.arena_bytes;
}

Status ComputeArena::allocate() {
  if (reserved_ == 0 || (buffer_ && buffer_->size() >= reserved_)) return ok_status();
  buffer_.reset();  // the old buffer goes first: growing must not need both at once
  const BufferDesc desc{reserved_, MemoryKind::Compute, owner_};
  KILN_ASSIGN_OR_RETURN(buffer_, resident_ != nullptr ? resident_->allocate(desc) : device_->allocate(desc));
  return ok_status();
}

Result<ExecPlan> ComputeArena::plan(const Graph& graph) {
  ExecPlan plan;
  KILN_ASSIGN_OR_RETURN(plan.memory_, plan_memory(graph, options()));
  reserved_ = std::max(reserved_, plan.memory_.arena_bytes);
  plan.graph_ = &graph;
  plan.arena_ = this;
  plan.bound_.assign(graph.size(), nullptr);
  plan.calls_.reserve(graph.op_nodes().size());
  for (int32_t id : graph.op_nodes()) plan.calls_.push_back(graph.shape_call(id));
  return plan;
}

void* ExecPlan::address(int32_t id) const {
  const GraphTensor& t = graph_->tensor(Tensor{id});
  const GraphTensor& root = graph_->tensor(Tensor{t.storage});
  void* base = nullptr;
  switch (root.role) {
    case TensorRole::Input:
      base = bound_[static_cast<size_t>(t.storage)];
      break;
    case TensorRole::External:
      base = root.view.data;
      break;
    case TensorRole::Op: {
      const Buffer* buf = arena_->buffer();
      const size_t off = memory_.offset[static_cast<size_t>(t.storage)];
      if (buf != nullptr && off != kNotInArena) base = static_cast<char*>(buf->base()) + off;
      break;
    }
    case TensorRole::View:
      KILN_ASSERT(false, "ExecPlan: a view as storage");
  }
  return base == nullptr ? nullptr : static_cast<char*>(base) + t.offset;
}

TensorView ExecPlan::view(Tensor t) const {
  TensorView v = graph_->tensor(t).view;
  v.data = address(t.id);
  return v;
}

Status ExecPlan::bind(Tensor t, const TensorView& memory) {
  const GraphTensor& in = graph_->tensor(t);
  if (in.role != TensorRole::Input)
    return make_error("plan: bind: ", graph_->describe(t.id), " is not an input");
  if (memory.type != in.view.type || memory.ne != in.view.ne || memory.nb != in.view.nb ||
      memory.data == nullptr) {
    return make_error("plan: bind: input ", graph_->describe(t.id), " is ", dtype_name(in.view.type), " [",
                      in.view.ne[0], ", ", in.view.ne[1], ", ", in.view.ne[2], ", ", in.view.ne[3],
                      "] contiguous; got ", dtype_name(memory.type), " [", memory.ne[0], ", ", memory.ne[1],
                      ", ", memory.ne[2], ", ", memory.ne[3], "]",
                      memory.nb != in.view.nb ? " with other strides" : "",
                      memory.data == nullptr ? " without data" : "");
  }
  bound_[static_cast<size_t>(t.id)] = memory.data;
  return ok_status();
}

Status ExecPlan::resolve_host_calls(const Device& device) { return resolve_calls(device, true); }

Status ExecPlan::resolve_device_calls(const Device& device) { return resolve_calls(device, false); }

Status ExecPlan::resolve_calls(const Device& device, bool host) {
  if (arena_->allocated_bytes() < memory_.arena_bytes) {
    return make_error("plan: arena '", arena_->owner(), "' holds ", arena_->allocated_bytes(),
                      " bytes, the graph needs ", memory_.arena_bytes, ": reserve() and allocate() it");
  }
  const std::vector<int32_t>& ops = graph_->op_nodes();
  auto fill = [&](TensorView& v, int32_t id) -> Status {
    void* addr = address(id);
    if (addr == nullptr) {
      const int32_t root = graph_->tensor(Tensor{id}).storage;
      return make_error("plan: input ", graph_->describe(root), " is not bound");
    }
    v.data = host ? device.host_address(addr, v.span_bytes()) : (device.holds(addr, v.span_bytes()) ? addr : nullptr);
    if (v.data == nullptr) {
      return make_error("plan: ", graph_->describe(id), " (", v.span_bytes(),
                        " bytes) is not in memory of device '", device.name(), "'");
    }
    return ok_status();
  };
  for (size_t i = 0; i < ops.size(); ++i) {
    OpCall& call = calls_[i];
    const GraphTensor& node = graph_->tensor(Tensor{ops[i]});
    KILN_TRY(fill(call.dst, ops[i]));
    for (int k = 0; k < call.n_src; ++k) KILN_TRY(fill(call.src[k], node.src[static_cast<size_t>(k)]));
  }
  return ok_status();
}

}  // namespace kiln
