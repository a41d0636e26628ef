// DPM-Solver++ samplers (dpm++2s_a, dpm++2m, dpm++2mv2) and iPNDM. See sampler_steps.h.
#include <algorithm>
#include <cmath>
#include <deque>

#include "diffusion/sampler_steps.h"

namespace kiln::diffusion::sampler_steps {
namespace {

// The log-SNR time of a sigma and back, as float results of double exp/log.
float t_of(float sigma) { return static_cast<float>(-std::log(double{sigma})); }
float sigma_of(float t) { return static_cast<float>(std::exp(double{-t})); }

// exp(-h) - 1, in double, rounded to float.
float expm1_neg(float h) { return static_cast<float>(std::exp(double{-h}) - 1); }

// x = x * a - y * b
void combine(Latent& x, float a, const Latent& y, float b) {
  for (size_t k = 0; k < x.size(); ++k) x[k] = x[k] * a - y[k] * b;
}

// The second-order multistep correction: denoised * (1 + 1 / 2r) - old_denoised * (1 / 2r).
Latent corrected(const Latent& denoised, const Latent& old_denoised, float r) {
  const float take_new = 1.f + 1.f / (2.f * r);
  const float take_old = 1.f / (2.f * r);
  Latent out(denoised.size());
  for (size_t k = 0; k < out.size(); ++k) out[k] = denoised[k] * take_new - old_denoised[k] * take_old;
  return out;
}

}  // namespace

Status dpmpp_2s_ancestral(const SamplerRun& run, float eta) {
  Latent denoised;
  for (int i = 0; i < run.steps(); ++i) {
    const float sigma = run.sigmas[i];
    KILN_TRY(run.call(run.x, sigma, denoised));
    const AncestralStep step = ancestral_step(sigma, run.sigmas[i + 1], eta);
    if (step.sigma_down == 0) {
      run.x = denoised;
    } else {
      const float t = t_of(sigma);
      const float t_next = t_of(step.sigma_down);
      const float h = t_next - t;
      const float sigma_s = sigma_of(t + 0.5f * h);
      Latent x2 = run.x;
      combine(x2, sigma_s / sigma_of(t), denoised, expm1_neg(h * 0.5f));
      KILN_TRY(run.call(x2, sigma_s, denoised));
      combine(run.x, sigma_of(t_next) / sigma_of(t), denoised, expm1_neg(h));
    }
    if (run.sigmas[i + 1] > 0) {
      const Latent noise = run.noise_like(run.x);
      for (size_t k = 0; k < noise.size(); ++k) run.x[k] = run.x[k] + noise[k] * step.sigma_up;
    }
  }
  return ok_status();
}

namespace {

// dpm++2m and its v2 (which takes the step's b from the mean of the two step lengths).
Status dpmpp_2m_family(const SamplerRun& run, bool v2) {
  Latent old_denoised = run.x;
  Latent denoised;
  for (int i = 0; i < run.steps(); ++i) {
    const float sigma = run.sigmas[i];
    const float sigma_next = run.sigmas[i + 1];
    KILN_TRY(run.call(run.x, sigma, denoised));
    const float t = t_of(sigma);
    const float h = t_of(sigma_next) - t;
    const float a = sigma_next / sigma;
    if (i == 0 || sigma_next == 0) {
      combine(run.x, a, denoised, expm1_neg(h));
    } else {
      const float h_last = t - t_of(run.sigmas[i - 1]);
      float r = h_last / h;
      float b = expm1_neg(h);
      if (v2) {
        const float h_min = std::min(h_last, h);
        const float h_max = std::max(h_last, h);
        r = h_max / h_min;
        b = expm1_neg((h_max + h_min) / 2.f);
      }
      combine(run.x, a, corrected(denoised, old_denoised, r), b);
    }
    old_denoised = denoised;
  }
  return ok_status();
}

}  // namespace

Status dpmpp_2m(const SamplerRun& run) { return dpmpp_2m_family(run, false); }
Status dpmpp_2m_v2(const SamplerRun& run) { return dpmpp_2m_family(run, true); }

// Adams-Bashforth of order up to 4 over the last derivatives.
Status ipndm(const SamplerRun& run) {
  constexpr size_t kMaxHistory = 3;
  std::deque<Latent> history;  // the previous derivatives, oldest first
  Latent denoised;
  for (int i = 0; i < run.steps(); ++i) {
    const float sigma = run.sigmas[i];
    const float dt = run.sigmas[i + 1] - sigma;
    KILN_TRY(run.call(run.x, sigma, denoised));
    Latent d(run.x.size());
    for (size_t k = 0; k < d.size(); ++k) d[k] = (run.x[k] - denoised[k]) / sigma;
    const size_t order = std::min(history.size() + 1, kMaxHistory + 1);
    for (size_t k = 0; k < d.size(); ++k) {
      float slope = d[k];
      if (order == 2) {
        slope = (d[k] * 3.f - history[0][k]) / 2.f;
      } else if (order == 3) {
        slope = (d[k] * 23.f - history[1][k] * 16.f + history[0][k] * 5.f) / 12.f;
      } else if (order == 4) {
        slope = (d[k] * 55.f - history[2][k] * 59.f + history[1][k] * 37.f - history[0][k] * 9.f) / 24.f;
      }
      run.x[k] = run.x[k] + slope * dt;
    }
    if (history.size() == kMaxHistory) history.pop_front();
    history.push_back(std::move(d));
  }
  return ok_status();
}

}  // namespace kiln::diffusion::sampler_steps
