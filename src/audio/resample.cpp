#include "audio/resample.h"

#include <soxr.h>

#include <cmath>

#include "core/check.h"

namespace kiln::audio {

Result<std::vector<float>> resample(std::span<const float> samples, int32_t from, int32_t to) {
  KILN_ASSERT(from > 0 && to > 0, "resample: rates must be positive");
  if (from == to) return std::vector<float>(samples.begin(), samples.end());
  const auto n_out = static_cast<size_t>(std::llround(static_cast<double>(samples.size()) * to / from));
  if (n_out == 0) return std::vector<float>();  // libsoxr must not be given an empty output
  std::vector<float> out(n_out);
  const soxr_io_spec_t io = soxr_io_spec(SOXR_FLOAT32_I, SOXR_FLOAT32_I);
  const soxr_quality_spec_t quality = soxr_quality_spec(SOXR_HQ, 0);
  size_t written = 0;
  const soxr_error_t err = soxr_oneshot(from, to, 1, samples.data(), samples.size(), nullptr, out.data(),
                                        out.size(), &written, &io, &quality, nullptr);
  if (err) return make_error("audio: resampling from ", from, " Hz to ", to, " Hz failed: ", err);
  out.resize(written);
  return out;
}

}  // namespace kiln::audio
