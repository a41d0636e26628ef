#include "diffusion/host_network.h"

namespace kiln::diffusion {

Result<HostNetwork> HostNetwork::create(std::string name, Backend& backend, ComputeArena* arena) {
  Device& dev = backend.device();
  if (!dev.is_host()) return make_error(name, ": runs on host devices only for now, not on '", dev.name(), "'");
  if (arena != nullptr && &arena->device() != &dev)
    return make_error(name, ": the compute arena '", arena->owner(), "' is on device '", arena->device().name(),
                      "', the backend on '", dev.name(), "'");
  HostNetwork n;
  n.name_ = std::move(name);
  n.backend_ = &backend;
  if (arena == nullptr) {
    n.own_arena_ = std::make_unique<ComputeArena>(dev, n.name_);
    arena = n.own_arena_.get();
  }
  n.arena_ = arena;
  return n;
}

Result<std::vector<float>> HostNetwork::run(const Graph& g, std::span<const Input> inputs, Tensor out) {
  KILN_TRY(g.status());
  KILN_TRY(arena_->reserve(g));
  KILN_TRY(arena_->allocate());  // allocates only when the reservation grew
  KILN_ASSIGN_OR_RETURN(ExecPlan plan, arena_->plan(g));
  KILN_TRY(backend_->prepare(plan));
  for (const Input& in : inputs) {
    const TensorView& shape = g.tensor(in.tensor).view;
    KILN_TRY(plan.bind(in.tensor, contiguous_view(shape.type, shape.ne, in.data)));
  }
  KILN_TRY(backend_->execute(plan));
  backend_->synchronize();
  const TensorView v = plan.view(out);
  std::vector<float> result(static_cast<size_t>(v.nelements()));
  KILN_TRY(backend_->device().download(v, result.data(), v.span_bytes()));
  return result;
}

}  // namespace kiln::diffusion
