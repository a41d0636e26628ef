// Hyperparameters of an audio encoder in llama.cpp's mmproj GGUF ("clip" architecture with
// clip.has_audio_encoder), read with llama.cpp's key names (clip.audio.*), for the projectors that
// sit on a Whisper-style encoder: ultravox, qwen2a, voxtral, glma and musicflamingo. Other audio
// projector types (meralion, the conformer-based lfm2a, gemma4a, granite_speech, parakeet, qwen3a,
// ...) are refused naming the type. The encoder itself is models/clip/whisper_encoder.h, its
// projectors models/clip/audio_projector.h; this is what a loader knows of the file before binding
// its tensors, and the number of embeddings a chunk of log-mel frames becomes.
#pragma once

#include <cstdint>
#include <string>

#include "core/gguf.h"
#include "core/result.h"

namespace kiln {

enum class AudioProjector : uint8_t { Ultravox, Qwen2a, Voxtral, Glma, MusicFlamingo };

struct AudioHParams {
  AudioProjector projector = AudioProjector::Ultravox;
  std::string projector_name;  // clip.audio.projector_type, else clip.projector_type
  int64_t n_mel = 0;           // clip.audio.num_mel_bins (the log-mel spectrogram's bins)
  int64_t n_embd = 0;          // clip.audio.embedding_length
  int64_t n_ff = 0;            // clip.audio.feed_forward_length
  int64_t n_layer = 0;         // clip.audio.block_count
  int64_t n_head = 0;          // clip.audio.attention.head_count
  float eps = 1e-5f;           // clip.audio.attention.layer_norm_epsilon
  int64_t stack_factor = 0;    // clip.audio.projector.stack_factor (ultravox, voxtral, glma: required)

  // ref: clip_model::audio_has_avgpool: qwen2a, voxtral and musicflamingo average pairs of
  // positions after the blocks.
  bool pools_pairs() const;
  // ref: clip_model::audio_has_stack_frames: ultravox and voxtral stack positions after the post
  // norm (glma stacks inside its projector; musicflamingo never stacks).
  bool stacks_frames() const;

  // Embeddings one chunk of n_frames log-mel frames becomes, as llama.cpp's clip_n_output_tokens
  // counts them: frames stacked by stack_factor (rounded up) where stacks_frames(), halved by the
  // stride-2 stem, halved again where pools_pairs() (rounded down each time); glma: halved by the
  // stem, divided by stack_factor (rounded down), plus its begin and end rows. A 3000-frame chunk:
  // 187 for ultravox with stack 8, 750 for qwen2a and musicflamingo, 377 for glma with stack 4.
  int64_t n_output_tokens(int64_t n_frames) const;
};

// Reads and validates the audio hyperparameters: the file must say it has an audio encoder, the
// projector type must be one of the five (else "mmproj: audio projector type 'x' is not supported
// (kiln reads ultravox, qwen2a, voxtral, glma, musicflamingo)"), sizes positive and bounded, heads
// dividing the width. Errors name the key: "mmproj: ...".
Result<AudioHParams> read_audio_hparams(const GgufFile& file);

}  // namespace kiln
