#include "audio/log_mel.h"

#include <algorithm>
#include <cmath>
#include <numbers>

#include "audio/mel_filters.h"

namespace kiln::audio {
namespace {

constexpr int32_t kBins = WhisperLogMel::kFft / 2 + 1;
constexpr int32_t kEdge = WhisperLogMel::kFft / 2;                        // reflected in front, zeros behind
constexpr int64_t kTailZeros = int64_t{WhisperLogMel::kSampleRate} * 30;  // 30 s of silence behind
constexpr int64_t kMinSamples = kEdge + 1;                                // reflection needs one more
constexpr double kPowerFloor = 5.960464477539063e-08;                     // 2^-24

int64_t frame_count(int64_t n_samples) {
  const int64_t padded = std::max(n_samples, kMinSamples) + kTailZeros + 2 * kEdge;
  return (padded - WhisperLogMel::kFft) / WhisperLogMel::kHop + 1;
}

}  // namespace

WhisperLogMel::WhisperLogMel(int32_t n_mel)
    : n_mel_(n_mel), fft_(kFft), window_(kFft), filters_(slaney_mel_filters(n_mel, kFft, kSampleRate)) {
  for (int32_t i = 0; i < kFft; ++i) {
    const auto angle = static_cast<float>(2.0 * std::numbers::pi * i / kFft);
    window_[i] = static_cast<float>(0.5 * (1.0 - std::cos(angle)));
  }
}

Result<WhisperLogMel> WhisperLogMel::create(int32_t n_mel) {
  if (n_mel < 1 || n_mel > kMaxMel) {
    return make_error("audio: ", n_mel, " mel bins: a Whisper-style encoder takes 1 to ", kMaxMel);
  }
  return WhisperLogMel(n_mel);
}

int64_t WhisperLogMel::chunk_count(int64_t n_samples) { return frame_count(n_samples) / kChunkFrames; }

std::vector<float> WhisperLogMel::log_mel(const std::vector<float>& padded, int64_t n_frames) const {
  std::vector<float> out(static_cast<size_t>(n_mel_) * static_cast<size_t>(n_frames));
  std::vector<float> frame(kFft), spectrum(2 * kFft), scratch;
  for (int64_t t = 0; t < n_frames; ++t) {
    const float* x = padded.data() + t * kHop;
    for (int32_t j = 0; j < kFft; ++j) frame[j] = window_[j] * x[j];
    fft_.forward(frame.data(), spectrum.data(), scratch);
    float* power = spectrum.data();  // bins' power, written over the spectrum's front
    for (int32_t k = 0; k < kBins; ++k) {
      const float re = spectrum[2 * k], im = spectrum[2 * k + 1];
      power[k] = re * re + im * im;
    }
    for (int32_t m = 0; m < n_mel_; ++m) {
      // Four bins' products summed in float, those partial sums in double: mtmd's order.
      const float* f = filters_.data() + static_cast<size_t>(m) * kBins;
      double sum = 0.0;
      int32_t k = 0;
      for (; k + 3 < kBins; k += 4) {
        sum += power[k] * f[k] + power[k + 1] * f[k + 1] + power[k + 2] * f[k + 2] + power[k + 3] * f[k + 3];
      }
      for (; k < kBins; ++k) sum += power[k] * f[k];
      out[static_cast<size_t>(m) * n_frames + t] = static_cast<float>(std::log10(std::max(sum, kPowerFloor)));
    }
  }
  return out;
}

Result<std::vector<MelChunk>> WhisperLogMel::chunks(std::span<const float> samples) const {
  if (samples.empty()) return make_error("audio: no samples to encode");
  const int64_t n = std::max<int64_t>(static_cast<int64_t>(samples.size()), kMinSamples);
  std::vector<float> padded(static_cast<size_t>(n + kTailZeros + 2 * kEdge), 0.0f);
  std::copy(samples.begin(), samples.end(), padded.begin() + kEdge);
  // Mirror padded[kEdge + 1 .. 2 * kEdge] into padded[0 .. kEdge): the edge sample not repeated.
  for (int32_t i = 0; i < kEdge; ++i) padded[i] = padded[2 * kEdge - i];

  const int64_t n_frames = frame_count(static_cast<int64_t>(samples.size()));
  std::vector<float> mel = log_mel(padded, n_frames);
  const double floor = *std::max_element(mel.begin(), mel.end()) - 8.0;
  for (float& v : mel) {
    const float clamped = v < floor ? static_cast<float>(floor) : v;
    v = static_cast<float>((clamped + 4.0) / 4.0);
  }

  std::vector<MelChunk> out(static_cast<size_t>(n_frames / kChunkFrames));
  for (size_t c = 0; c < out.size(); ++c) {
    out[c].n_mel = n_mel_;
    out[c].n_frames = kChunkFrames;
    out[c].data.resize(static_cast<size_t>(n_mel_) * kChunkFrames);
    for (int32_t m = 0; m < n_mel_; ++m) {
      const float* src = mel.data() + static_cast<size_t>(m) * n_frames + c * kChunkFrames;
      std::copy(src, src + kChunkFrames, out[c].data.data() + static_cast<size_t>(m) * kChunkFrames);
    }
  }
  return out;
}

}  // namespace kiln::audio
