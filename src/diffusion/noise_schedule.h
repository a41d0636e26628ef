// The discrete noise schedule of the UNet models (stable-diffusion.cpp's CompVisDenoiser): 1000
// training timesteps, sigma(t) = sqrt((1 - alphas_cumprod[t]) / alphas_cumprod[t]) in float, the
// alphas from the "scaled linear" betas 0.00085..0.012 unless the model file brings its own.
// Between timesteps sigma is interpolated log-linearly; sigma_to_t inverts that.
// Thread-safety: immutable after construction.
#pragma once

#include <array>
#include <span>

#include "core/result.h"

namespace kiln::diffusion {

inline constexpr int kTrainingTimesteps = 1000;

class NoiseSchedule {
 public:
  // The scaled-linear schedule of SD 1.x, 2.x and XL.
  NoiseSchedule();
  // A model file's `alphas_cumprod`: kTrainingTimesteps values, each in (0, 1]. On an Error
  // stable-diffusion.cpp warns and keeps the default schedule; a caller matching it does the same.
  static Result<NoiseSchedule> from_alphas_cumprod(std::span<const float> alphas_cumprod);

  float sigma_min() const { return sigmas_.front(); }
  float sigma_max() const { return sigmas_.back(); }
  float sigma_at(int timestep) const { return sigmas_[timestep]; }
  // t in [0, kTrainingTimesteps - 1].
  float t_to_sigma(float t) const;
  // sigma > 0; t clamped to the table's range.
  float sigma_to_t(float sigma) const;

 private:
  void set_alphas_cumprod(std::span<const float> alphas_cumprod);

  std::array<float, kTrainingTimesteps> sigmas_{};
  std::array<float, kTrainingTimesteps> log_sigmas_{};
};

}  // namespace kiln::diffusion
