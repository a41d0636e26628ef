// AudioEncoder: runs an AudioModel on a Backend: one PreparedAudio chunk in, embeddings out (one
// row of the text model's n_embd floats per audio token), as llama.cpp's mtmd_encode does for an
// audio chunk.
//
// Memory and cache: llm/media_encoder.h, as the vision encoder. The encoder's residents (the
// mmproj's tensors, its mul_mat weights prepared in the kernels' layouts, and the input buffer of a
// 30-second log-mel chunk) are the owner "mmproj NAME (audio)", apart from a vision encoder of the
// same file; its graphs run in the shared arena (EncoderOptions::arena), reserved for a 30-second
// chunk at creation. Embeddings are cached by the chunk's id (PreparedAudio::id: the file's
// content id and the chunk's index), so an audio file sent again is not encoded again.
//
// Ownership: shares the AudioModel; the Backend (and a shared arena) must outlive the encoder.
// Thread-safety: as MediaEncoder: any thread.
#pragma once

#include <memory>

#include "llm/audio_model.h"
#include "llm/media_encoder.h"

namespace kiln {

using AudioEncoderOptions = EncoderOptions;

class AudioEncoder {
 public:
  // Errors: as MediaEncoder::create ("audio encoder: ...").
  static Result<std::unique_ptr<AudioEncoder>> create(std::shared_ptr<const AudioModel> model,
                                                      Backend& backend, const AudioEncoderOptions& options);

  // The embeddings of one chunk ([n_tokens][n_embd], causal): from the cache when a chunk of the
  // same id was encoded, else computed (and cached). Errors come from the backend.
  Result<std::shared_ptr<const ImageEmbeddings>> encode(const PreparedAudio& chunk);

  const AudioModel& model() const { return *model_; }
  // The owner of the encoder's weights and inputs on its device.
  OwnerId owner() const { return core_->owner(); }
  const DeviceWeights& weights() const { return core_->weights(); }
  const ComputeArena& arena() const { return core_->arena(); }
  // Compute-arena bytes a 30-second chunk's graph needs.
  size_t worst_case_arena_bytes() const { return core_->worst_case_arena_bytes(); }
  MediaEncoder::CacheStats cache_stats() const { return core_->cache_stats(); }

 private:
  AudioEncoder() = default;
  // The graph of a chunk of `n_frames` log-mel frames whose values are at `mel` (non-owning:
  // must outlive the pass; its bytes are not read while building).
  Result<EncoderPass> build(Graph& g, int64_t n_frames, const float* mel) const;

  std::shared_ptr<const AudioModel> model_;
  AttentionPath attention_ = AttentionPath::Flash;
  std::unique_ptr<MediaEncoder> core_;
};

}  // namespace kiln
