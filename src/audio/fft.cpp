#include "audio/fft.h"

#include <cmath>
#include <numbers>

#include "core/check.h"

namespace kiln::audio {

RealFft::RealFft(int32_t n) : n_(n), cos_(static_cast<size_t>(n)), sin_(static_cast<size_t>(n)) {
  KILN_ASSERT(n > 0, "RealFft: length must be positive");
  for (int32_t i = 0; i < n; ++i) {
    // The angle in double, its sine and cosine in float (mtmd's table).
    const auto theta = static_cast<float>(2.0 * std::numbers::pi * i / n);
    cos_[i] = std::cos(theta);
    sin_[i] = std::sin(theta);
  }
}

void RealFft::forward(const float* in, float* out, std::vector<float>& scratch) const {
  // Each even level takes 3 * its length (halves, and the halves' spectra): under 6 * n_ in all.
  scratch.resize(static_cast<size_t>(6) * n_);
  transform(in, n_, out, scratch.data());
}

void RealFft::direct_dft(const float* in, int32_t n, float* out) const {
  const int32_t step = n_ / n;
  for (int32_t k = 0; k < n; ++k) {
    float re = 0.0f, im = 0.0f;
    for (int32_t j = 0; j < n; ++j) {
      const int32_t idx = (k * j * step) % n_;
      re += in[j] * cos_[idx];
      im += -in[j] * sin_[idx];
    }
    out[2 * k] = re;
    out[2 * k + 1] = im;
  }
}

void RealFft::transform(const float* in, int32_t n, float* out, float* scratch) const {
  if (n == 1) {
    out[0] = in[0];
    out[1] = 0.0f;
    return;
  }
  if (n % 2 == 1) {
    direct_dft(in, n, out);
    return;
  }
  const int32_t half = n / 2;
  float* even = scratch;             // [half]
  float* odd = scratch + half;       // [half]
  float* even_out = scratch + n;     // [2 * half]
  float* odd_out = scratch + 2 * n;  // [2 * half]
  for (int32_t i = 0; i < half; ++i) {
    even[i] = in[2 * i];
    odd[i] = in[2 * i + 1];
  }
  transform(even, half, even_out, scratch + 3 * n);
  transform(odd, half, odd_out, scratch + 3 * n);
  const int32_t step = n_ / n;
  for (int32_t k = 0; k < half; ++k) {
    // w = exp(-2*pi*i*k/n); out[k] = E[k] + w*O[k], out[k + n/2] = E[k] - w*O[k].
    const float wr = cos_[k * step];
    const float wi = -sin_[k * step];
    const float ore = odd_out[2 * k], oim = odd_out[2 * k + 1];
    const float ere = even_out[2 * k], eim = even_out[2 * k + 1];
    out[2 * k] = ere + wr * ore - wi * oim;
    out[2 * k + 1] = eim + wr * oim + wi * ore;
    out[2 * (k + half)] = ere - wr * ore + wi * oim;
    out[2 * (k + half) + 1] = eim - wr * oim - wi * ore;
  }
}

}  // namespace kiln::audio
