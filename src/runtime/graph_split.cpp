#include "runtime/graph_split.h"

#include <algorithm>
#include <cstring>
#include <string>

namespace kiln {
namespace {

size_t align_to(size_t n, size_t a) { return (n + a - 1) / a * a; }

std::vector<std::string> device_names(std::span<Device* const> devices) {
  std::vector<std::string> out;
  for (const Device* d : devices) out.push_back(d->name());
  return out;
}

}  // namespace

ExternalPlacement placement_by_holds(std::span<Device* const> devices) {
  return [devs = std::vector<Device*>(devices.begin(), devices.end())](const TensorView& v) {
    const size_t bytes = v.span_bytes();
    for (size_t d = 0; d < devs.size(); ++d) {
      if (!devs[d]->is_host() && devs[d]->holds(v.data, bytes)) return d;
    }
    for (size_t d = 0; d < devs.size(); ++d) {
      if (devs[d]->is_host() && devs[d]->holds(v.data, bytes)) return d;
    }
    return kNoDevice;
  };
}

Result<std::vector<size_t>> assign_devices(const Graph& g, const ExternalPlacement& where,
                                           std::span<const std::string> names) {
  KILN_TRY(g.status());
  if (names.empty()) return make_error("graph split: no device");
  const std::vector<GraphTensor>& ts = g.tensors();
  std::vector<size_t> external_device(ts.size(), kNoDevice);
  for (size_t id = 0; id < ts.size(); ++id) {
    if (ts[id].role != TensorRole::External) continue;
    external_device[id] = where(ts[id].view);
    if (external_device[id] >= names.size())
      return make_error("graph split: ", g.describe(static_cast<int32_t>(id)), " lies on none of the devices");
  }
  std::vector<size_t> computed_on(ts.size(), kNoDevice);  // per op result: where it was computed
  std::vector<size_t> out;
  out.reserve(g.op_nodes().size());
  size_t previous = 0;
  for (int32_t id : g.op_nodes()) {
    const GraphTensor& t = ts[static_cast<size_t>(id)];
    size_t pinned = kNoDevice;  // by external memory
    int32_t pinned_by = -1;
    size_t follows = kNoDevice;  // by the first computed source
    auto touch = [&](int32_t tensor_id) -> Status {
      const int32_t root = ts[static_cast<size_t>(tensor_id)].storage;
      const size_t ext = external_device[static_cast<size_t>(root)];
      if (ext != kNoDevice) {
        if (pinned != kNoDevice && pinned != ext)
          return make_error("graph split: ", g.describe(id), " reads ", g.describe(pinned_by), " on ", names[pinned],
                            " and ", g.describe(root), " on ", names[ext]);
        pinned = ext;
        pinned_by = root;
      } else if (follows == kNoDevice && computed_on[static_cast<size_t>(root)] != kNoDevice) {
        follows = computed_on[static_cast<size_t>(root)];
      }
      return ok_status();
    };
    for (int i = 0; i < t.n_src; ++i) KILN_TRY(touch(t.src[static_cast<size_t>(i)]));
    if (t.storage != id) KILN_TRY(touch(t.storage));  // writes into a leaf
    const size_t d = pinned != kNoDevice ? pinned : follows != kNoDevice ? follows : previous;
    computed_on[static_cast<size_t>(id)] = d;
    out.push_back(d);
    previous = d;
  }
  return out;
}

// Copies the op nodes of one part into a Graph of its own (a friend of Graph: it copies
// GraphTensors with their ids mapped, so every shape and view stays exactly as built).
class GraphPartBuilder {
 public:
  GraphPartBuilder(const Graph& from, Graph& to) : from_(from), to_(to), map_(from.size(), -1) {}

  // Maps tensor `id` of the source graph into the part, adding leaves as needed (see the header).
  int32_t map(int32_t id) {
    int32_t& slot = map_[static_cast<size_t>(id)];
    if (slot >= 0) return slot;
    const GraphTensor& t = from_.tensors_[static_cast<size_t>(id)];
    GraphTensor copy = t;
    switch (t.role) {
      case TensorRole::Input:
        inputs.emplace_back(id, Tensor{add(copy, true)});
        return slot = inputs.back().second.id;
      case TensorRole::External:
        return slot = add(copy, true);
      case TensorRole::View: {
        copy.storage = map(t.storage);
        copy.src[0] = map(t.src[0]);
        return slot = add(copy, false);
      }
      case TensorRole::Op:
        break;
    }
    // An op result computed by an earlier part (copy() maps those of this part first): its own
    // storage crosses as an input leaf of the same type and sizes. A write into a leaf's memory
    // (set_rows, cpy_into) read by a later part reads that leaf instead.
    if (t.storage != id) {
      copy.role = TensorRole::View;
      copy.storage = map(t.storage);
      copy.src[0] = copy.storage;
      copy.n_src = 1;
      return slot = add(copy, false);
    }
    GraphTensor leaf;
    leaf.role = TensorRole::Input;
    leaf.name = t.name;
    leaf.view = t.view;
    leaf.view.data = nullptr;
    leaf.view.layout = TensorLayout::Plain;
    slot = add(leaf, true);
    reads.push_back({id, Tensor{slot}});
    return slot;
  }

  // Copies op node `id` of the source graph (its sources mapped first).
  void copy_node(int32_t id) {
    GraphTensor copy = from_.tensors_[static_cast<size_t>(id)];
    for (int i = 0; i < copy.n_src; ++i) copy.src[static_cast<size_t>(i)] = map(copy.src[static_cast<size_t>(i)]);
    const bool own = copy.storage == id;
    if (!own) copy.storage = map(copy.storage);
    const int32_t new_id = static_cast<int32_t>(to_.tensors_.size());
    if (own) copy.storage = new_id;
    to_.tensors_.push_back(std::move(copy));
    to_.op_nodes_.push_back(new_id);
    map_[static_cast<size_t>(id)] = new_id;
  }

  int32_t mapped(int32_t id) const { return map_[static_cast<size_t>(id)]; }
  void mark_output(int32_t new_id) { to_.tensors_[static_cast<size_t>(new_id)].output = true; }

  std::vector<std::pair<int32_t, Tensor>> inputs;
  std::vector<std::pair<int32_t, Tensor>> reads;  // crossings: source id -> input leaf

 private:
  // Appends `t` (a leaf: its storage is itself) and returns its id in the part.
  int32_t add(GraphTensor t, bool leaf) {
    const int32_t new_id = static_cast<int32_t>(to_.tensors_.size());
    if (leaf) t.storage = new_id;
    t.output = false;
    to_.tensors_.push_back(std::move(t));
    return new_id;
  }

  const Graph& from_;
  Graph& to_;
  std::vector<int32_t> map_;
};

Result<SplitPlan> SplitPlan::cut(const Graph& g, const std::vector<size_t>& device_of,
                                 std::span<const size_t> alignments) {
  SplitPlan sp;
  sp.transfer_bytes_.assign(alignments.size(), 0);
  const std::vector<int32_t>& ops = g.op_nodes();
  const std::vector<GraphTensor>& ts = g.tensors();

  // Parts: runs of consecutive nodes on one device.
  std::vector<size_t> part_of(ts.size(), SIZE_MAX);  // per op node id
  std::vector<std::pair<size_t, size_t>> runs;       // [begin, end) in ops
  for (size_t i = 0; i < ops.size(); ++i) {
    if (runs.empty() || device_of[i] != device_of[runs.back().first]) runs.push_back({i, i});
    runs.back().second = i + 1;
    part_of[static_cast<size_t>(ops[i])] = runs.size() - 1;
  }
  if (runs.size() <= 1) {  // one device: the graph itself
    auto part = std::make_unique<Part>();
    part->device = runs.empty() ? 0 : device_of[0];
    part->graph = &g;
    for (size_t id = 0; id < ts.size(); ++id) {
      const auto tid = static_cast<int32_t>(id);
      if (ts[id].role == TensorRole::Input) part->inputs.emplace_back(tid, Tensor{tid});
      if (ts[id].output) part->outputs.emplace_back(tid, Tensor{tid});
    }
    sp.parts_.push_back(std::move(part));
    return sp;
  }

  sp.staging_.resize(ts.size());
  std::vector<std::unique_ptr<GraphPartBuilder>> builders;  // per part, alive until every part is cut
  for (size_t p = 0; p < runs.size(); ++p) {
    auto part = std::make_unique<Part>();
    part->device = device_of[runs[p].first];
    part->own = std::make_unique<Graph>();
    part->graph = part->own.get();
    builders.push_back(std::make_unique<GraphPartBuilder>(g, *part->own));
    GraphPartBuilder& b = *builders.back();
    for (size_t i = runs[p].first; i < runs[p].second; ++i) b.copy_node(ops[i]);
    // Graph outputs computed here, or views of results computed here.
    for (size_t id = 0; id < ts.size(); ++id) {
      if (!ts[id].output) continue;
      const auto tid = static_cast<int32_t>(id);
      const int32_t root = ts[id].storage;
      const bool here = (ts[id].role == TensorRole::Op && part_of[id] == p) ||
                        (ts[id].role == TensorRole::View && ts[static_cast<size_t>(root)].role == TensorRole::Op &&
                         part_of[static_cast<size_t>(root)] == p);
      if (here) part->outputs.emplace_back(tid, Tensor{b.map(tid)});
    }
    part->inputs = std::move(b.inputs);
    size_t offset = 0;
    const size_t align = alignments[part->device];
    for (const auto& [source, leaf] : b.reads) {
      part->reads.push_back({source, leaf, offset});
      offset += align_to(ts[static_cast<size_t>(source)].view.span_bytes(), align);
      const size_t producer = part_of[static_cast<size_t>(source)];
      Part& prod = *sp.parts_[producer];
      bool listed = false;
      for (const Crossing& w : prod.writes) listed = listed || w.source == source;
      if (!listed) {
        const Tensor there{builders[producer]->mapped(source)};
        prod.writes.push_back({source, there, 0});
        builders[producer]->mark_output(there.id);
        sp.staging_[static_cast<size_t>(source)].resize(ts[static_cast<size_t>(source)].view.span_bytes());
      }
    }
    sp.transfer_bytes_[part->device] = std::max(sp.transfer_bytes_[part->device], offset);
    sp.parts_.push_back(std::move(part));
  }
  for (auto& part : sp.parts_) {
    for (const auto& [orig, t] : part->outputs) builders[&part - sp.parts_.data()]->mark_output(t.id);
  }
  for (auto& part : sp.parts_) KILN_TRY(part->own->status());
  return sp;
}

Result<SplitPlan> SplitPlan::create(const Graph& g, std::span<ComputeArena* const> arenas) {
  std::vector<Device*> devices;
  for (ComputeArena* a : arenas) devices.push_back(&a->device());
  return create(g, arenas, placement_by_holds(devices), device_names(devices));
}

Result<SplitPlan> SplitPlan::create(const Graph& g, std::span<ComputeArena* const> arenas,
                                    const ExternalPlacement& where, std::span<const std::string> names) {
  if (names.size() != arenas.size()) return make_error("graph split: ", names.size(), " names for ", arenas.size(), " arenas");
  std::vector<size_t> alignments;
  for (ComputeArena* a : arenas) alignments.push_back(arena_alignment(a->device()));
  KILN_ASSIGN_OR_RETURN(const std::vector<size_t> device_of, assign_devices(g, where, names));
  KILN_ASSIGN_OR_RETURN(SplitPlan sp, cut(g, device_of, alignments));
  for (size_t p = 0; p < sp.parts_.size(); ++p) {
    Part& part = *sp.parts_[p];
    KILN_ASSIGN_OR_RETURN(ExecPlan plan, arenas[part.device]->plan(*part.graph));
    part.plan.emplace(std::move(plan));
    for (size_t q = p + 1; q < sp.parts_.size() && !part.outputs.empty(); ++q)
      part.stage_outputs = part.stage_outputs || arenas[sp.parts_[q]->device] == arenas[part.device];
    if (!part.stage_outputs) continue;
    sp.staging_.resize(g.size());
    for (const auto& [orig, there] : part.outputs)
      sp.staging_[static_cast<size_t>(orig)].resize(g.tensor(Tensor{orig}).view.span_bytes());
  }
  for (ComputeArena* a : arenas) KILN_TRY(a->allocate());
  return sp;
}

Result<SplitMeasure> SplitPlan::measure(const Graph& g, const ExternalPlacement& where,
                                        std::span<const std::string> names, std::span<const size_t> alignments) {
  KILN_ASSIGN_OR_RETURN(const std::vector<size_t> device_of, assign_devices(g, where, names));
  KILN_ASSIGN_OR_RETURN(SplitPlan sp, cut(g, device_of, alignments));
  SplitMeasure m;
  m.arena_bytes.assign(names.size(), 0);
  m.scratch_bytes.assign(names.size(), 0);
  m.transfer_bytes = sp.transfer_bytes_;
  m.transfer_bytes.resize(names.size(), 0);
  for (const auto& part : sp.parts_) {
    PlannerOptions o;
    o.alignment = alignments[part->device];
    KILN_ASSIGN_OR_RETURN(const MemoryPlan mp, plan_memory(*part->graph, o));
    m.arena_bytes[part->device] = std::max(m.arena_bytes[part->device], mp.arena_bytes);
    m.scratch_bytes[part->device] = std::max(m.scratch_bytes[part->device], mp.scratch_bytes);
  }
  return m;
}

bool SplitPlan::reads_on(Tensor t, size_t d) const {
  for (const auto& part : parts_) {
    if (part->device != d) continue;
    for (const auto& [orig, leaf] : part->inputs) {
      if (orig == t.id) return true;
    }
  }
  return false;
}

Status SplitPlan::bind(Tensor t, size_t d, const TensorView& memory) {
  for (auto& part : parts_) {
    if (part->device != d) continue;
    for (const auto& [orig, leaf] : part->inputs) {
      if (orig == t.id) KILN_TRY(part->plan->bind(leaf, memory));
    }
  }
  return ok_status();
}

Status SplitPlan::prepare(std::span<const SplitDevice> devices) {
  for (auto& part : parts_) KILN_TRY(devices[part->device].backend->prepare(*part->plan));
  return ok_status();
}

Status SplitPlan::relocate(size_t p, const void* built, size_t bytes, void* now) {
  Part& part = *parts_[p];
  if (!part.own) return make_error("graph split: the one part of a graph that is not cut cannot move its memory");
  auto it = std::find_if(part.moved.begin(), part.moved.end(), [&](const auto& m) { return m.first == built; });
  if (it == part.moved.end()) it = part.moved.insert(part.moved.end(), {built, const_cast<void*>(built)});
  if (it->second == now) return ok_status();
  const auto* from = static_cast<const uint8_t*>(it->second);
  const std::vector<GraphTensor>& ts = part.own->tensors();
  for (size_t id = 0; id < ts.size(); ++id) {
    if (ts[id].role != TensorRole::External) continue;
    const auto* data = static_cast<const uint8_t*>(ts[id].view.data);
    if (data < from || data >= from + bytes) continue;
    KILN_TRY(part.own->rebind_external(Tensor{static_cast<int32_t>(id)}, static_cast<uint8_t*>(now) + (data - from),
                                       ts[id].view.layout));
  }
  it->second = now;
  return ok_status();
}

Status SplitPlan::execute(std::span<const SplitDevice> devices) { return run(devices, nullptr); }

Status SplitPlan::execute(std::span<const SplitDevice> devices, FunctionRef<Status(size_t part)> before) {
  return run(devices, &before);
}

Status SplitPlan::run(std::span<const SplitDevice> devices, const FunctionRef<Status(size_t part)>* before) {
  for (size_t p = 0; p < parts_.size(); ++p) {
    if (before != nullptr) KILN_TRY((*before)(p));
    const auto& part = parts_[p];
    const SplitDevice& sd = devices[part->device];
    Device& dev = sd.backend->device();
    for (const Crossing& r : part->reads) {
      const std::vector<uint8_t>& bytes = staging_[static_cast<size_t>(r.source)];
      const TensorView& shape = part->graph->tensor(r.tensor).view;
      if (sd.transfer == nullptr) return make_error("graph split: no transfer memory on ", dev.name());
      KILN_ASSIGN_OR_RETURN(TensorView v, sd.transfer->view(shape.type, shape.ne, sd.transfer_offset + r.offset));
      KILN_TRY(dev.upload(v, bytes.data(), bytes.size()));
      KILN_TRY(part->plan->bind(r.tensor, v));
    }
    KILN_TRY(sd.backend->execute(*part->plan));
    sd.backend->synchronize();
    for (const Crossing& w : part->writes) {
      std::vector<uint8_t>& bytes = staging_[static_cast<size_t>(w.source)];
      KILN_TRY(dev.download(part->plan->view(w.tensor), bytes.data(), bytes.size()));
    }
    for (const auto& [orig, there] : part->outputs) {
      if (!part->stage_outputs) break;
      std::vector<uint8_t>& bytes = staging_[static_cast<size_t>(orig)];
      KILN_TRY(dev.download(part->plan->view(there), bytes.data(), bytes.size()));
    }
  }
  return ok_status();
}

Status SplitPlan::download(Tensor t, void* dst, size_t n) const {
  for (const auto& part : parts_) {
    for (const auto& [orig, there] : part->outputs) {
      if (orig != t.id) continue;
      const TensorView v = part->plan->view(there);
      if (n != v.span_bytes())
        return make_error("graph split: download of ", part->graph->describe(there.id), ": ", n, " bytes for ",
                          v.span_bytes());
      if (part->stage_outputs) {
        std::memcpy(dst, staging_[static_cast<size_t>(orig)].data(), n);
        return ok_status();
      }
      return part->plan->arena().device().download(v, dst, n);
    }
  }
  return make_error("graph split: tensor #", t.id, " is not an output of the graph");
}

}  // namespace kiln
