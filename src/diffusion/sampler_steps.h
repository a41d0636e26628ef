// Internal to samplers.cpp and its sampler_*.cpp files: one function per sampler family over a
// SamplerRun. Each mirrors stable-diffusion.cpp's sample_* function: every tensor operation there is
// one float rounding here, scalars computed in the same types (its unqualified exp/log/pow/sqrt on
// floats resolve to the double functions).
#pragma once

#include <span>
#include <vector>

#include "diffusion/samplers.h"

namespace kiln::diffusion::sampler_steps {

using Latent = std::vector<float>;

struct SamplerRun {
  const DenoiseFn& denoise;
  Latent& x;
  std::span<const float> sigmas;
  NoiseRng& rng;

  int steps() const { return static_cast<int>(sigmas.size()) - 1; }
  // denoised = model(in, sigma); `denoised` is resized to in.size().
  Status call(const Latent& in, float sigma, Latent& denoised) const;
  // The next in.size() normal floats of the stream.
  Latent noise_like(const Latent& in) const;
};

// sigma_down and sigma_up of an ancestral step (k-diffusion's get_ancestral_step).
struct AncestralStep {
  float sigma_down;
  float sigma_up;
};
AncestralStep ancestral_step(float sigma_from, float sigma_to, float eta);

Status euler_ancestral(const SamplerRun& run, float eta);  // also ddim_trailing
Status euler(const SamplerRun& run);
Status heun(const SamplerRun& run);
Status dpm2(const SamplerRun& run);
Status lcm(const SamplerRun& run);
Status tcd(const SamplerRun& run, float eta);

Status dpmpp_2s_ancestral(const SamplerRun& run, float eta);
Status dpmpp_2m(const SamplerRun& run);
Status dpmpp_2m_v2(const SamplerRun& run);
Status ipndm(const SamplerRun& run);

}  // namespace kiln::diffusion::sampler_steps
