#include "diffusion/conditioning_math.h"

#include <algorithm>
#include <cmath>

#include "core/check.h"

namespace kiln::diffusion {
namespace {

// The mean as stable-diffusion.cpp's Tensor<float>::mean: a double sum in order, then a float.
float mean_of(std::span<const float> values) {
  double sum = 0.0;
  for (float v : values) sum += static_cast<double>(v);
  return static_cast<float>(sum / static_cast<double>(values.size()));
}

}  // namespace

void apply_token_weights(std::span<float> hidden, std::span<const float> weights) {
  if (hidden.empty() || std::all_of(weights.begin(), weights.end(), [](float w) { return w == 1.0f; }))
    return;
  KILN_ASSERT(hidden.size() % weights.size() == 0, "apply_token_weights: rows do not match the weights");
  const size_t row = hidden.size() / weights.size();
  const float original_mean = mean_of(hidden);
  for (size_t t = 0; t < weights.size(); ++t) {
    for (size_t h = 0; h < row; ++h) hidden[t * row + h] *= weights[t];
  }
  const float new_mean = mean_of(hidden);
  if (std::isfinite(original_mean) && std::isfinite(new_mean) && new_mean != 0.0f) {
    const float rescale = original_mean / new_mean;
    for (float& v : hidden) v *= rescale;
  }
}

std::vector<float> timestep_embedding(std::span<const float> timesteps, int dim) {
  constexpr int kMaxPeriod = 10000;
  const int half = dim / 2;
  std::vector<float> freqs(half);
  for (int j = 0; j < half; ++j) {
    freqs[j] = static_cast<float>(std::exp(-std::log(double{kMaxPeriod}) * j / half));
  }
  std::vector<float> embedding(timesteps.size() * static_cast<size_t>(dim), 0.f);
  for (size_t i = 0; i < timesteps.size(); ++i) {
    for (int j = 0; j < half; ++j) {
      const float arg = timesteps[i] * freqs[j] * 1.f;
      embedding[i * dim + j] = std::cos(arg);
      embedding[i * dim + j + half] = std::sin(arg);
    }
  }
  return embedding;
}

std::vector<float> sdxl_conditioning_vector(std::span<const float> pooled, int width, int height) {
  KILN_ASSERT(pooled.size() == kSdxlPooledWidth, "sdxl_conditioning_vector: pooled width");
  constexpr int kEmbeddingWidth = 256;
  std::vector<float> vec(pooled.begin(), pooled.end());
  const float size[] = {static_cast<float>(height), static_cast<float>(width)};
  const float crop[] = {0.0f, 0.0f};
  for (std::span<const float> pair :
       {std::span<const float>(size), std::span<const float>(crop), std::span<const float>(size)}) {
    const std::vector<float> e = timestep_embedding(pair, kEmbeddingWidth);
    vec.insert(vec.end(), e.begin(), e.end());
  }
  return vec;
}

}  // namespace kiln::diffusion
