#include "llm/graph_pass.h"

namespace kiln {
namespace {

constexpr size_t kInputAlign = 64;

size_t align_up(size_t n) { return (n + kInputAlign - 1) / kInputAlign * kInputAlign; }

}  // namespace

size_t pass_input_bytes(const Graph& g, std::span<const PassInput> inputs) {
  size_t total = 0;
  for (const PassInput& in : inputs) total += align_up(g.tensor(in.tensor).view.span_bytes());
  return total;
}

Status place_weights(Graph& g, const DeviceWeights& weights, const std::string& what) {
  for (size_t i = 0; i < g.size(); ++i) {
    const GraphTensor& t = g.tensors()[i];
    if (t.role != TensorRole::External) continue;
    const Weight* w = weights.tensor(t.name);
    if (w == nullptr || w->view.span_bytes() != t.view.span_bytes())
      return make_error(what, ": the graph reads '", t.name, "', which is not a tensor of ", weights.name());
    KILN_TRY(g.rebind_external(Tensor{static_cast<int32_t>(i)}, w->view.data, w->view.layout));
  }
  return ok_status();
}

std::vector<std::string> matmul_weights(const Graph& g) {
  std::vector<std::string> names;
  for (size_t i = 0; i < g.size(); ++i) {
    const GraphTensor& t = g.tensors()[i];
    if (t.role == TensorRole::External && g.read_only_as_weights(Tensor{static_cast<int32_t>(i)}))
      names.push_back(t.name);
  }
  return names;
}

Result<ResidencyManager::Pin> pin_arena(const ComputeArena& arena) {
  ResidencyManager* m = arena.device().residency();
  const OwnerId owner = arena.resident_owner();
  if (owner == 0 || m == nullptr) return ResidencyManager::Pin();
  return m->pin(owner);
}

Result<ExecPlan> run_pass(const Graph& g, std::span<const PassInput> inputs, Buffer& input_buffer,
                          ComputeArena& arena, Backend& backend) {
  KILN_TRY(g.status());
  KILN_TRY(arena.reserve(g));
  KILN_TRY(arena.allocate());  // allocates only when the reservation grew
  KILN_ASSIGN_OR_RETURN(ExecPlan plan, arena.plan(g));
  KILN_TRY(backend.prepare(plan));
  Device& dev = backend.device();
  size_t offset = 0;
  for (const PassInput& in : inputs) {
    const TensorView& shape = g.tensor(in.tensor).view;
    KILN_ASSIGN_OR_RETURN(TensorView v, input_buffer.view(shape.type, shape.ne, offset));
    offset += align_up(v.span_bytes());
    KILN_TRY(dev.upload(v, in.host, v.span_bytes()));
    KILN_TRY(plan.bind(in.tensor, v));
  }
  KILN_TRY(backend.execute(plan));
  backend.synchronize();
  return plan;
}

}  // namespace kiln
