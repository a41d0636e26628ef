// AudioEncoder: runs an AudioModel on a host Backend: one PreparedAudio chunk in, embeddings out
// (one row of the text model's n_embd floats per audio token), as llama.cpp's mtmd_encode does for
// an audio chunk.
//
// Memory (first version, issue 36): the encoder plans its graph in a ComputeArena of its own,
// reserved for a 30-second chunk at creation, and reads the mmproj's weights in place in the
// mapping, so it runs on a host device only (the CPU backend); it is not yet a resident of the
// device's residency manager and does not share the text model's arena, as VisionEncoder does.
// Embeddings are not cached.
//
// Ownership: shares the AudioModel; the Backend must outlive the encoder.
// Thread-safety: encode() takes the encoder's mutex (and the `turn` arena's turn, see create).
#pragma once

#include <memory>
#include <mutex>

#include "llm/audio_model.h"
#include "llm/vision_encoder.h"
#include "runtime/backend.h"
#include "runtime/planner.h"

namespace kiln {

class AudioEncoder {
 public:
  // Errors: the backend's device is not the host ("audio encoder: ... runs on the CPU only").
  // `turn`: an arena whose turn (ComputeArena::take_turn) encode() holds while it computes, so the
  // encoder and the owners of that arena (a server's engine) do not run on the backend at once;
  // null: none. It must outlive the encoder.
  static Result<std::unique_ptr<AudioEncoder>> create(std::shared_ptr<const AudioModel> model, Backend& backend,
                                                      FlashAttention flash_attention = FlashAttention::Auto,
                                                      ComputeArena* turn = nullptr);

  // The embeddings of one chunk ([n_tokens][n_embd], causal). Errors come from the backend.
  Result<std::shared_ptr<const ImageEmbeddings>> encode(const PreparedAudio& chunk);

  const AudioModel& model() const { return *model_; }

 private:
  AudioEncoder() = default;
  std::shared_ptr<const AudioModel> model_;
  Backend* backend_ = nullptr;
  AttentionPath attention_ = AttentionPath::Flash;
  std::unique_ptr<ComputeArena> arena_;
  ComputeArena* turn_ = nullptr;
  std::mutex mutex_;
};

}  // namespace kiln
