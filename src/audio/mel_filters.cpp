#include "audio/mel_filters.h"

#include <algorithm>
#include <cmath>

#include "core/check.h"

namespace kiln::audio {
namespace {

// Slaney's scale: linear below 1 kHz (3 mels per 200 Hz), logarithmic above (27 mels per factor 6.4).
constexpr double kLogStartHz = 1000.0;
constexpr double kMelsPerHz = 3.0 / 200.0;
constexpr double kLogStartMel = kLogStartHz * kMelsPerHz;
const double kLogStep = std::log(6.4) / 27.0;

double hz_to_mel(double hz) {
  return hz < kLogStartHz ? hz * kMelsPerHz : kLogStartMel + std::log(hz / kLogStartHz) / kLogStep;
}

double mel_to_hz(double mel) {
  return mel < kLogStartMel ? mel / kMelsPerHz : kLogStartHz * std::exp((mel - kLogStartMel) * kLogStep);
}

}  // namespace

std::vector<float> slaney_mel_filters(int32_t n_mel, int32_t n_fft, int32_t sample_rate) {
  KILN_ASSERT(n_mel > 0 && n_fft > 1 && sample_rate > 0, "slaney_mel_filters: bad sizes");
  const int32_t n_bins = n_fft / 2 + 1;
  const double top_mel = hz_to_mel(0.5 * sample_rate);
  std::vector<double> edge_hz(static_cast<size_t>(n_mel) + 2);
  for (size_t i = 0; i < edge_hz.size(); ++i) edge_hz[i] = mel_to_hz(top_mel * (double(i) / (n_mel + 1)));

  const double bin_hz = double(sample_rate) / double(n_fft);
  std::vector<float> filters(static_cast<size_t>(n_mel) * n_bins, 0.0f);
  for (int32_t m = 0; m < n_mel; ++m) {
    const double left = edge_hz[m], centre = edge_hz[m + 1], right = edge_hz[m + 2];
    const double rise = std::max(1e-30, centre - left);
    const double fall = std::max(1e-30, right - centre);
    const double area_norm = 2.0 / std::max(1e-30, right - left);
    for (int32_t k = 0; k < n_bins; ++k) {
      const double f = k * bin_hz;
      double w = 0.0;
      if (f >= left && f <= centre) {
        w = (f - left) / rise;
      } else if (f > centre && f <= right) {
        w = (right - f) / fall;
      }
      filters[static_cast<size_t>(m) * n_bins + k] = static_cast<float>(w * area_norm);
    }
  }
  return filters;
}

}  // namespace kiln::audio
