// WhisperLogMel: the log-mel spectrogram Whisper-style audio encoders read, computed exactly as
// llama.cpp's mtmd computes it for the Whisper-style encoders (projectors ultravox, qwen2a, voxtral,
// glma, musicflamingo; and Whisper itself):
//   - input: mono float samples at 16 kHz (kSampleRate); fewer than 201 are zero-extended to 201;
//   - padding: the first 200 samples mirrored in front (reflection, the edge sample not repeated),
//     then 200 + 30 s of zeros behind;
//   - frames every 160 samples (kHop) of 400 (kFft), each windowed by a periodic Hann window and
//     transformed (audio/fft.h), power |X|^2 of the 201 bins, through the Slaney mel filter bank of
//     the model's number of mel bins (audio/mel_filters.h, 80 or 128), floored at 2^-24, log10;
//   - over the whole spectrogram: values below (max - 8) raised to it, then (x + 4) / 4;
//   - cut into chunks of 3000 frames (30 s, what the encoder's graph takes), an incomplete last
//     chunk dropped: n samples give floor(((n' + 480000) / 160 + 1) / 3000) chunks (n' = max(n, 201)),
//     so 30 s of audio make two chunks, the second mostly silence, as in llama.cpp.
// ref: llama.cpp tools/mtmd/mtmd-audio.cpp (mtmd_audio_preprocessor_whisper); OpenAI Whisper,
// whisper/audio.py (log_mel_spectrogram).
// Thread-safety: const methods are reentrant.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "audio/fft.h"
#include "core/result.h"

namespace kiln::audio {

struct MelChunk {
  int32_t n_mel = 0;
  int32_t n_frames = 0;     // kChunkFrames
  std::vector<float> data;  // [n_mel][n_frames], frames fastest
};

class WhisperLogMel {
 public:
  static constexpr int32_t kSampleRate = 16000;
  static constexpr int32_t kFft = 400;
  static constexpr int32_t kHop = 160;
  static constexpr int32_t kChunkFrames = 3000;
  static constexpr int32_t kMaxMel = 256;

  // n_mel in [1, kMaxMel], else an Error naming it (it comes from a model file).
  static Result<WhisperLogMel> create(int32_t n_mel);

  int32_t n_mel() const { return n_mel_; }

  // The chunks of `samples` (see the header comment). Error on no samples.
  Result<std::vector<MelChunk>> chunks(std::span<const float> samples) const;

  // How many chunks chunks() makes of n_samples samples (n_samples > 0).
  static int64_t chunk_count(int64_t n_samples);

 private:
  explicit WhisperLogMel(int32_t n_mel);
  // log10 mel energies of every frame of `padded`: [n_mel][n_frames].
  std::vector<float> log_mel(const std::vector<float>& padded, int64_t n_frames) const;

  int32_t n_mel_;
  RealFft fft_;
  std::vector<float> window_;   // [kFft] periodic Hann
  std::vector<float> filters_;  // [n_mel][kFft / 2 + 1]
};

}  // namespace kiln::audio
