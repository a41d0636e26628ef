// Euler-family samplers (euler, euler_a / ddim_trailing, heun, dpm2) and the consistency-model
// samplers (lcm, tcd). See sampler_steps.h.
#include <algorithm>
#include <cmath>

#include "diffusion/noise_schedule.h"
#include "diffusion/sampler_steps.h"

namespace kiln::diffusion::sampler_steps {
namespace {

// d = (x - denoised) / sigma, the ODE's derivative.
Latent derivative(const Latent& x, const Latent& denoised, float sigma) {
  Latent d(x.size());
  for (size_t k = 0; k < x.size(); ++k) d[k] = (x[k] - denoised[k]) / sigma;
  return d;
}

// x += d * dt
void add_scaled(Latent& x, const Latent& d, float dt) {
  for (size_t k = 0; k < x.size(); ++k) x[k] = x[k] + d[k] * dt;
}

// x = x * keep + denoised * take
void blend(Latent& x, float keep, const Latent& denoised, float take) {
  for (size_t k = 0; k < x.size(); ++k) x[k] = x[k] * keep + denoised[k] * take;
}

}  // namespace

Status euler_ancestral(const SamplerRun& run, float eta) {
  Latent denoised;
  for (int i = 0; i < run.steps(); ++i) {
    const float sigma = run.sigmas[i];
    const float sigma_to = run.sigmas[i + 1];
    KILN_TRY(run.call(run.x, sigma, denoised));
    if (sigma_to == 0.f) {
      run.x = denoised;
    } else if (eta == 0.f) {
      const float ratio = sigma_to / sigma;
      blend(run.x, ratio, denoised, static_cast<float>(1.0 - ratio));
    } else {
      const AncestralStep step = ancestral_step(sigma, sigma_to, eta);
      const float ratio = step.sigma_down / sigma;
      blend(run.x, ratio, denoised, 1.0f - ratio);
      if (step.sigma_up > 0.f) add_scaled(run.x, run.noise_like(run.x), step.sigma_up);
    }
  }
  return ok_status();
}

Status euler(const SamplerRun& run) {
  Latent denoised;
  for (int i = 0; i < run.steps(); ++i) {
    const float sigma = run.sigmas[i];
    KILN_TRY(run.call(run.x, sigma, denoised));
    add_scaled(run.x, derivative(run.x, denoised, sigma), run.sigmas[i + 1] - sigma);
  }
  return ok_status();
}

Status heun(const SamplerRun& run) {
  Latent denoised;
  for (int i = 0; i < run.steps(); ++i) {
    const float sigma = run.sigmas[i];
    const float sigma_next = run.sigmas[i + 1];
    KILN_TRY(run.call(run.x, sigma, denoised));
    Latent d = derivative(run.x, denoised, sigma);
    const float dt = sigma_next - sigma;
    if (sigma_next != 0) {
      Latent x2 = run.x;
      add_scaled(x2, d, dt);
      KILN_TRY(run.call(x2, sigma_next, denoised));
      const Latent d2 = derivative(x2, denoised, sigma_next);
      for (size_t k = 0; k < d.size(); ++k) d[k] = (d[k] + d2[k]) / 2.0f;
    }
    add_scaled(run.x, d, dt);
  }
  return ok_status();
}

Status dpm2(const SamplerRun& run) {
  Latent denoised;
  for (int i = 0; i < run.steps(); ++i) {
    const float sigma = run.sigmas[i];
    const float sigma_next = run.sigmas[i + 1];
    KILN_TRY(run.call(run.x, sigma, denoised));
    const Latent d = derivative(run.x, denoised, sigma);
    if (sigma_next == 0) {
      add_scaled(run.x, d, sigma_next - sigma);
      continue;
    }
    const float sigma_mid =
        static_cast<float>(std::exp(0.5f * (std::log(double{sigma}) + std::log(double{sigma_next}))));
    Latent x2 = run.x;
    add_scaled(x2, d, sigma_mid - sigma);
    KILN_TRY(run.call(x2, sigma_mid, denoised));
    add_scaled(run.x, derivative(x2, denoised, sigma_mid), sigma_next - sigma);
  }
  return ok_status();
}

// With stable-diffusion.cpp's default extra arguments: no noise clipping, noise scale 1.
Status lcm(const SamplerRun& run) {
  Latent denoised;
  for (int i = 0; i < run.steps(); ++i) {
    const float sigma_next = run.sigmas[i + 1];
    KILN_TRY(run.call(run.x, run.sigmas[i], denoised));
    run.x = denoised;
    if (sigma_next > 0) add_scaled(run.x, run.noise_like(run.x), sigma_next);
  }
  return ok_status();
}

namespace {

// TCD's own alphas_cumprod, accumulated in double from the scaled-linear betas, and the sigmas
// they give (also double), for mapping a sigma back to its nearest training timestep.
struct TcdTable {
  std::vector<double> alphas_cumprod = std::vector<double>(kTrainingTimesteps);
  std::vector<double> sigmas = std::vector<double>(kTrainingTimesteps);

  TcdTable() {
    const float start = std::sqrt(0.00085f);
    const float span = std::sqrt(0.0120f) - start;
    for (int i = 0; i < kTrainingTimesteps; ++i) {
      const float beta_sqrt = start + span * (static_cast<float>(i) / (kTrainingTimesteps - 1));
      const double previous = i == 0 ? 1.0 : alphas_cumprod[i - 1];
      alphas_cumprod[i] = previous * (1.0f - std::pow(double{beta_sqrt}, 2.0));
      sigmas[i] = std::sqrt((1 - alphas_cumprod[i]) / alphas_cumprod[i]);
    }
  }

  int nearest_timestep(float sigma) const {
    const auto it = std::lower_bound(sigmas.begin(), sigmas.end(), sigma);
    if (it == sigmas.begin()) return 0;
    if (it == sigmas.end()) return kTrainingTimesteps - 1;
    const int high = static_cast<int>(it - sigmas.begin());
    const int low = high - 1;
    return std::abs(sigmas[high] - sigma) < std::abs(sigmas[low] - sigma) ? high : low;
  }
};

}  // namespace

Status tcd(const SamplerRun& run, float eta) {
  static const TcdTable table;
  Latent denoised;
  for (int i = 0; i < run.steps(); ++i) {
    const float sigma = run.sigmas[i];
    const float sigma_to = run.sigmas[i + 1];
    const int prev_timestep = table.nearest_timestep(sigma_to);
    const int timestep_s =
        static_cast<int>(std::floor(double{(1 - eta) * static_cast<float>(prev_timestep)}));
    KILN_TRY(run.call(run.x, sigma, denoised));
    const Latent d = derivative(run.x, denoised, sigma);
    const float alpha_prod_t_prev = 1.0f / (sigma_to * sigma_to + 1.0f);
    const float alpha_prod_s = static_cast<float>(table.alphas_cumprod[timestep_s]);
    const float beta_prod_s = 1.0f - alpha_prod_s;
    const float take_denoised = std::sqrt(alpha_prod_s / alpha_prod_t_prev);
    const float take_d = std::sqrt(beta_prod_s / alpha_prod_t_prev);
    for (size_t k = 0; k < d.size(); ++k) run.x[k] = denoised[k] * take_denoised + d[k] * take_d;
    if (eta > 0 && sigma_to > 0.0f) {
      const float keep = std::sqrt(alpha_prod_t_prev / alpha_prod_s);
      const float renoise = std::sqrt(1.0f / alpha_prod_t_prev - 1.0f / alpha_prod_s);
      blend(run.x, keep, run.noise_like(run.x), renoise);
    }
  }
  return ok_status();
}

}  // namespace kiln::diffusion::sampler_steps
