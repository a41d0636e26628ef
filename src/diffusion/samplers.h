// The samplers of stable-diffusion.cpp for the UNet (non-flow) models, as pure functions over a
// float latent, bit for bit: same arithmetic, same order, same random draws.
// The model is a callback: denoise(x, sigma, denoised) writes the denoised estimate of x at noise
// level sigma (the UNet with classifier-free guidance and the prediction's scalings, see
// denoise_step.h). A sampler stops at the callback's first error and returns it.
// Thread-safety: reentrant; the callback and the RNG are used from the calling thread only.
#pragma once

#include <functional>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "core/result.h"
#include "diffusion/noise_rng.h"

namespace kiln::diffusion {

enum class Sampler { EulerA, Euler, Heun, Dpm2, Dpmpp2sA, Dpmpp2m, Dpmpp2mV2, Ipndm, Lcm, DdimTrailing, Tcd };

// sd-cli's --sampling-method names: euler_a, euler, heun, dpm2, dpm++2s_a, dpm++2m, dpm++2mv2,
// ipndm, lcm, ddim_trailing, tcd.
std::optional<Sampler> parse_sampler(std::string_view name);
std::string_view sampler_name(Sampler sampler);
std::span<const Sampler> all_samplers();

// x.size() == denoised.size(); x is read-only for the callback's duration.
using DenoiseFn = std::function<Status(std::span<const float> x, float sigma, std::span<float> denoised)>;

// Runs `sampler` from x (the initial noisy latent, replaced by the result) through `sigmas`
// (decreasing, ending in 0; at least 2 values). `rng` supplies the per-step noise of the stochastic
// samplers (euler_a, dpm++2s_a, lcm, and ddim_trailing and tcd when eta > 0), continuing the stream
// that drew the initial noise. `eta`: the ancestral noise amount (default_eta in sampling_defaults.h gives
// sd-cli's).
Status sample(Sampler sampler, const DenoiseFn& denoise, std::vector<float>& x, std::span<const float> sigmas,
              NoiseRng& rng, float eta);

}  // namespace kiln::diffusion
