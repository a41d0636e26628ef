// The interpolation helpers behind the AYS and SGM-uniform schedulers, with stable-diffusion.cpp's
// float and double steps (its results depend on them bit for bit).
// Thread-safety: pure functions.
#pragma once

#include <cstddef>
#include <span>
#include <vector>

namespace kiln::diffusion {

// count >= 2 points from `start` towards `end`, each the previous plus (end - start) / (count - 1)
// in float (so the last one carries the accumulated rounding).
std::vector<float> accumulated_linear_space(float start, float end, size_t count);

// `descending` (>= 2 positive values, largest first) resampled to `count` values: linear in log
// sigma over the ascending order, positions accumulated_linear_space(0, 1, ...), interpolated in
// double.
std::vector<float> log_linear_resample_descending(std::span<const float> descending, size_t count);

}  // namespace kiln::diffusion
