// The arithmetic around one UNet evaluation, as stable-diffusion.cpp's sample() does it for the
// UNet models (bit for bit, elementwise, no fused multiply-add):
//   model input  = x * c_in, at timestep NoiseSchedule::sigma_to_t(sigma)
//   guided       = uncond + cfg_scale * (cond - uncond)       (classifier-free guidance)
//   denoised     = guided * c_out + x * c_skip
// and the start of sampling: x = latent + noise * sigmas[0] (zeros as the latent for txt2img).
// All spans of one call have the same size; `out` may alias no input.
// Thread-safety: pure functions.
#pragma once

#include <span>

#include "diffusion/prediction.h"

namespace kiln::diffusion {

void scale_model_input(std::span<const float> x, float c_in, std::span<float> out);
void apply_cfg(std::span<const float> cond, std::span<const float> uncond, float cfg_scale,
               std::span<float> out);
void denoised_from_output(std::span<const float> model_output, std::span<const float> x,
                          const Scalings& scalings, std::span<float> out);
void add_noise(std::span<const float> latent, std::span<const float> noise, float sigma,
               std::span<float> out);

}  // namespace kiln::diffusion
