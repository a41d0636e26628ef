#include "diffusion/noise_schedule.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace kiln::diffusion {

NoiseSchedule::NoiseSchedule() {
  const float start = std::sqrt(0.00085f);
  const float span = std::sqrt(0.0120f) - start;
  std::vector<float> alphas_cumprod(kTrainingTimesteps);
  float product = 1.0f;
  for (int i = 0; i < kTrainingTimesteps; ++i) {
    const float beta_sqrt = start + span * (static_cast<float>(i) / (kTrainingTimesteps - 1));
    product *= 1.0f - std::pow(beta_sqrt, 2.0f);
    alphas_cumprod[i] = product;
  }
  set_alphas_cumprod(alphas_cumprod);
}

Result<NoiseSchedule> NoiseSchedule::from_alphas_cumprod(std::span<const float> alphas_cumprod) {
  if (alphas_cumprod.size() != kTrainingTimesteps) {
    return make_error("diffusion: alphas_cumprod has ", alphas_cumprod.size(), " values, expected ",
                      kTrainingTimesteps);
  }
  for (float a : alphas_cumprod) {
    if (!(a > 0.0f && a <= 1.0f))
      return make_error("diffusion: alphas_cumprod value ", a, " is outside (0, 1]");
  }
  NoiseSchedule schedule;
  schedule.set_alphas_cumprod(alphas_cumprod);
  return schedule;
}

void NoiseSchedule::set_alphas_cumprod(std::span<const float> alphas_cumprod) {
  for (int i = 0; i < kTrainingTimesteps; ++i) {
    sigmas_[i] = std::sqrt((1 - alphas_cumprod[i]) / alphas_cumprod[i]);
    log_sigmas_[i] = std::log(sigmas_[i]);
  }
}

float NoiseSchedule::t_to_sigma(float t) const {
  const int low = static_cast<int>(std::floor(t));
  const int high = static_cast<int>(std::ceil(t));
  const float w = t - static_cast<float>(low);
  return std::exp((1.0f - w) * log_sigmas_[low] + w * log_sigmas_[high]);
}

float NoiseSchedule::sigma_to_t(float sigma) const {
  const float log_sigma = std::log(sigma);
  // The last timestep whose log sigma is <= log_sigma (counted as stable-diffusion.cpp counts it:
  // the number of entries with a non-negative distance), kept where an upper neighbour exists.
  int at_or_below = 0;
  for (float entry : log_sigmas_) at_or_below += (log_sigma - entry >= 0) ? 1 : 0;
  const int low = std::min(std::max(at_or_below - 1, 0), kTrainingTimesteps - 2);
  const int high = low + 1;
  const float w_raw = (log_sigmas_[low] - log_sigma) / (log_sigmas_[low] - log_sigmas_[high]);
  const float w = std::max(0.f, std::min(1.f, w_raw));  // not std::clamp: a NaN becomes 1 here
  return (1.0f - w) * static_cast<float>(low) + w * static_cast<float>(high);
}

}  // namespace kiln::diffusion
