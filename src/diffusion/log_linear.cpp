#include "diffusion/log_linear.h"

#include <algorithm>
#include <cmath>

namespace kiln::diffusion {
namespace {

// Piecewise-linear y(x) at each of xs (ascending), the reference xs ascending; the first and last
// query clamped into the reference range.
std::vector<double> interpolate(std::vector<float> xs, std::span<const float> ref_x,
                                std::span<const float> ref_y) {
  std::vector<double> ys(xs.size());
  xs.front() = std::max(xs.front(), ref_x.front());
  xs.back() = std::min(xs.back(), ref_x.back());
  size_t j = 0;
  for (size_t i = 0; i < xs.size() && j + 1 < ref_x.size();) {
    if (ref_x[j] > xs[i] || xs[i] > ref_x[j + 1]) {
      ++j;
      continue;
    }
    const double frac = static_cast<double>(xs[i] - ref_x[j]) / static_cast<double>(ref_x[j + 1] - ref_x[j]);
    ys[i] = double{ref_y[j]} * (1. - frac) + double{ref_y[j + 1]} * frac;
    ++i;
  }
  return ys;
}

}  // namespace

std::vector<float> accumulated_linear_space(float start, float end, size_t count) {
  std::vector<float> points(count);
  const float increment = (end - start) / static_cast<float>(count - 1);
  points[0] = start;
  for (size_t i = 1; i < count; ++i) points[i] = points[i - 1] + increment;
  return points;
}

std::vector<float> log_linear_resample_descending(std::span<const float> descending, size_t count) {
  const size_t n = descending.size();
  std::vector<float> log_ascending(n);
  for (size_t i = 0; i < n; ++i) log_ascending[i] = std::log(descending[n - 1 - i]);
  const std::vector<float> ref_x = accumulated_linear_space(0.f, 1.f, n);
  const std::vector<double> log_values =
      interpolate(accumulated_linear_space(0.f, 1.f, count), ref_x, log_ascending);
  std::vector<float> out(count);
  for (size_t i = 0; i < count; ++i) out[i] = static_cast<float>(std::exp(log_values[count - 1 - i]));
  return out;
}

}  // namespace kiln::diffusion
