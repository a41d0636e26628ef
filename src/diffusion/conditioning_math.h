// The float arithmetic stable-diffusion.cpp applies to the text encoders' outputs for the UNet
// models, bit for bit:
// - emphasis: each token's hidden row times its weight, then the whole chunk rescaled so that its
//   mean (a double sum in element order, rounded to float) is what it was; skipped when every weight
//   is 1, and the rescale skipped when either mean is not finite or the new mean is 0
//   (apply_token_weights);
// - SDXL's size conditioning: the pooled text embedding followed by the 256-wide sinusoidal
//   embeddings (cos half first, max period 10000) of (height, width), the crop (0, 0) and
//   (height, width) again: 1280 + 6 * 256 = 2816 values (get_learned_condition_common).
// Thread-safety: pure functions.
#pragma once

#include <span>
#include <vector>

namespace kiln::diffusion {

// hidden: weights.size() rows (tokens) of hidden.size() / weights.size() values, in place.
void apply_token_weights(std::span<float> hidden, std::span<const float> weights);

// The sinusoidal embedding of each timestep, `dim` (even) values per timestep: cos(t * f_j) for
// j < dim / 2, then sin(t * f_j), with f_j = exp(-ln(10000) * j / (dim / 2)).
std::vector<float> timestep_embedding(std::span<const float> timesteps, int dim);

inline constexpr int kSdxlPooledWidth = 1280;
inline constexpr int kSdxlVectorWidth = 2816;

// pooled: kSdxlPooledWidth values (OpenCLIP-bigG's projected pooled output).
std::vector<float> sdxl_conditioning_vector(std::span<const float> pooled, int width, int height);

}  // namespace kiln::diffusion
