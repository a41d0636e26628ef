// Sample-rate conversion of mono float audio with libsoxr at its high quality (SOXR_HQ: 20-bit
// precision, a linear-phase filter passing 95% of the lower Nyquist band), the resampler SoX and
// ffmpeg's `soxr` option use. Output length: round(n * to / from) (possibly none: one sample at
// 400 kHz is nothing at 16 kHz).
// Thread-safety: reentrant.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "core/result.h"

namespace kiln::audio {

// from, to > 0. An Error (naming the rates) only when libsoxr fails.
Result<std::vector<float>> resample(std::span<const float> samples, int32_t from, int32_t to);

}  // namespace kiln::audio
