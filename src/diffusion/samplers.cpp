#include "diffusion/samplers.h"

#include <algorithm>
#include <array>
#include <cmath>

#include "diffusion/sampler_steps.h"

namespace kiln::diffusion {
namespace {

struct Named {
  Sampler sampler;
  std::string_view name;
};

constexpr std::array<Named, 11> kNames = {{
    {Sampler::EulerA, "euler_a"},
    {Sampler::Euler, "euler"},
    {Sampler::Heun, "heun"},
    {Sampler::Dpm2, "dpm2"},
    {Sampler::Dpmpp2sA, "dpm++2s_a"},
    {Sampler::Dpmpp2m, "dpm++2m"},
    {Sampler::Dpmpp2mV2, "dpm++2mv2"},
    {Sampler::Ipndm, "ipndm"},
    {Sampler::Lcm, "lcm"},
    {Sampler::DdimTrailing, "ddim_trailing"},
    {Sampler::Tcd, "tcd"},
}};

// The names' order, as a list of values.
constexpr std::array<Sampler, kNames.size()> kAll = [] {
  std::array<Sampler, kNames.size()> all{};
  for (size_t i = 0; i < kNames.size(); ++i) all[i] = kNames[i].sampler;
  return all;
}();

}  // namespace

namespace sampler_steps {

Status SamplerRun::call(const Latent& in, float sigma, Latent& denoised) const {
  denoised.resize(in.size());
  return denoise(in, sigma, denoised);
}

Latent SamplerRun::noise_like(const Latent& in) const {
  Latent noise(in.size());
  rng.randn(noise);
  return noise;
}

AncestralStep ancestral_step(float sigma_from, float sigma_to, float eta) {
  if (eta <= 0.0f) return {sigma_to, 0.0f};
  float sigma_up = 0.0f;
  const float from_sq = sigma_from * sigma_from;
  const float to_sq = sigma_to * sigma_to;
  if (from_sq > 0.0f) {
    const float term = to_sq * (from_sq - to_sq) / from_sq;
    sigma_up = std::min(sigma_to, eta * std::sqrt(std::max(term, 0.0f)));
  }
  const float down_sq = to_sq - sigma_up * sigma_up;
  return {down_sq > 0.0f ? std::sqrt(down_sq) : 0.0f, sigma_up};
}

}  // namespace sampler_steps

std::optional<Sampler> parse_sampler(std::string_view name) {
  for (const Named& n : kNames) {
    if (n.name == name) return n.sampler;
  }
  return std::nullopt;
}

std::string_view sampler_name(Sampler sampler) {
  for (const Named& n : kNames) {
    if (n.sampler == sampler) return n.name;
  }
  return "?";
}

std::span<const Sampler> all_samplers() { return kAll; }

Status sample(Sampler sampler, const DenoiseFn& denoise, std::vector<float>& x, std::span<const float> sigmas,
              NoiseRng& rng, float eta) {
  using namespace sampler_steps;
  if (sigmas.size() < 2)
    return make_error("diffusion: a sampler needs at least 2 sigmas, got ", sigmas.size());
  const SamplerRun run{denoise, x, sigmas, rng};
  switch (sampler) {
    case Sampler::EulerA:
    case Sampler::DdimTrailing:
      return euler_ancestral(run, eta);
    case Sampler::Euler:
      return euler(run);
    case Sampler::Heun:
      return heun(run);
    case Sampler::Dpm2:
      return dpm2(run);
    case Sampler::Dpmpp2sA:
      return dpmpp_2s_ancestral(run, eta);
    case Sampler::Dpmpp2m:
      return dpmpp_2m(run);
    case Sampler::Dpmpp2mV2:
      return dpmpp_2m_v2(run);
    case Sampler::Ipndm:
      return ipndm(run);
    case Sampler::Lcm:
      return lcm(run);
    case Sampler::Tcd:
      return tcd(run, eta);
  }
  return make_error("diffusion: unknown sampler");
}

}  // namespace kiln::diffusion
