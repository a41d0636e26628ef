#include "diffusion/img2img_sigmas.h"

#include <cstddef>

namespace kiln::diffusion {

Result<std::vector<float>> img2img_sigmas(std::span<const float> sigmas, float strength) {
  if (!(strength >= 0.f && strength <= 1.f)) {
    return make_error("diffusion: the img2img strength must be in [0, 1], got ", strength);
  }
  if (sigmas.size() < 2) return make_error("diffusion: img2img needs at least 2 sigmas, got ", sigmas.size());
  if (strength == 1.f) return std::vector<float>(sigmas.begin(), sigmas.end());
  const size_t steps = sigmas.size() - 1;
  size_t t_enc = static_cast<size_t>(static_cast<float>(steps) * strength);
  if (t_enc == steps) --t_enc;
  return std::vector<float>(sigmas.begin() + static_cast<std::ptrdiff_t>(steps - t_enc - 1), sigmas.end());
}

}  // namespace kiln::diffusion
