#include "diffusion/noise_rng.h"

#include "diffusion/philox_rng.h"
#include "diffusion/torch_cpu_rng.h"

namespace kiln::diffusion {

std::unique_ptr<NoiseRng> make_noise_rng(RngKind kind) {
  if (kind == RngKind::Cpu) return std::make_unique<TorchCpuRng>();
  return std::make_unique<PhiloxRng>();
}

std::optional<RngKind> parse_rng_kind(std::string_view name) {
  if (name == "cuda") return RngKind::Cuda;
  if (name == "cpu") return RngKind::Cpu;
  return std::nullopt;
}

std::string_view rng_kind_name(RngKind kind) { return kind == RngKind::Cpu ? "cpu" : "cuda"; }

}  // namespace kiln::diffusion
