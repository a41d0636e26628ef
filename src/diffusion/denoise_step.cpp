#include "diffusion/denoise_step.h"

#include "core/check.h"

namespace kiln::diffusion {

void scale_model_input(std::span<const float> x, float c_in, std::span<float> out) {
  KILN_ASSERT(x.size() == out.size(), "scale_model_input: sizes differ");
  for (size_t k = 0; k < x.size(); ++k) out[k] = x[k] * c_in;
}

void apply_cfg(std::span<const float> cond, std::span<const float> uncond, float cfg_scale,
               std::span<float> out) {
  KILN_ASSERT(cond.size() == out.size() && uncond.size() == out.size(), "apply_cfg: sizes differ");
  for (size_t k = 0; k < out.size(); ++k) out[k] = uncond[k] + (cond[k] - uncond[k]) * cfg_scale;
}

void denoised_from_output(std::span<const float> model_output, std::span<const float> x,
                          const Scalings& scalings, std::span<float> out) {
  KILN_ASSERT(model_output.size() == out.size() && x.size() == out.size(),
              "denoised_from_output: sizes differ");
  for (size_t k = 0; k < out.size(); ++k) out[k] = model_output[k] * scalings.c_out + x[k] * scalings.c_skip;
}

void add_noise(std::span<const float> latent, std::span<const float> noise, float sigma,
               std::span<float> out) {
  KILN_ASSERT(latent.size() == out.size() && noise.size() == out.size(), "add_noise: sizes differ");
  for (size_t k = 0; k < out.size(); ++k) out[k] = latent[k] + noise[k] * sigma;
}

}  // namespace kiln::diffusion
