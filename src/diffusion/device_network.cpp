#include "diffusion/device_network.h"

#include <algorithm>

namespace kiln::diffusion {

Result<std::unique_ptr<DeviceNetwork>> DeviceNetwork::create(std::string name,
                                                             std::shared_ptr<const sd::SdWeightFile> file,
                                                             std::vector<std::string> name_prefixes,
                                                             const NetworkPlacement& placement) {
  Backend& backend = *placement.backend;
  Device& dev = backend.device();
  ComputeArena* arena = placement.arena;
  if (arena != nullptr && &arena->device() != &dev)
    return make_error(name, ": the compute arena '", arena->owner(), "' is on device '",
                      arena->device().name(), "', the backend on '", dev.name(), "'");
  std::unique_ptr<DeviceNetwork> n(new DeviceNetwork());
  n->name_ = name;
  n->backend_ = &backend;
  if (arena == nullptr) {
    n->own_arena_ = std::make_unique<ComputeArena>(dev, name);
    arena = n->own_arena_.get();
  }
  n->arena_ = arena;
  WeightOptions weights = placement.weights;
  weights.holds = [&name_prefixes](int64_t, const GgufTensorInfo& t) {
    return std::any_of(name_prefixes.begin(), name_prefixes.end(),
                       [&t](const std::string& p) { return t.name.starts_with(p); });
  };
  const GgufFile& gguf = file->gguf();
  KILN_ASSIGN_OR_RETURN(n->memory_, EncoderMemory::create(std::shared_ptr<const GgufFile>(std::move(file), &gguf),
                                                          std::move(name), dev, 0, {}, weights));
  return n;
}

Result<std::vector<float>> DeviceNetwork::run(Graph& g, std::span<const PassInput> inputs, Tensor out) {
  KILN_TRY(g.status());
  KILN_ASSIGN_OR_RETURN(const ResidencyManager::Pin own, memory_->pin());
  KILN_ASSIGN_OR_RETURN(const ResidencyManager::Pin arena_pin, pin_arena(*arena_));
  const auto turn = arena_->take_turn();
  KILN_TRY(place_weights(g, memory_->weights(), name_));
  KILN_TRY(memory_->grow_inputs(pass_input_bytes(g, inputs)));
  KILN_ASSIGN_OR_RETURN(const ExecPlan plan, run_pass(g, inputs, memory_->inputs(), *arena_, *backend_));
  const TensorView v = plan.view(out);
  std::vector<float> result(static_cast<size_t>(v.nelements()));
  KILN_TRY(backend_->device().download(v, result.data(), v.span_bytes()));
  return result;
}

}  // namespace kiln::diffusion
