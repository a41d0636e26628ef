// VisionEncoder: runs a VisionModel on a Backend: PreparedImage in, embeddings out (one row of the
// text model's n_embd floats per image token), as llama.cpp's mtmd_encode.
//
// Memory and cache: llm/media_encoder.h. The encoder's residents are the owner "mmproj NAME"; it
// runs on any device the text decoder runs on (the device's kernels give the host's bits: sim
// devices run the host kernels). Embeddings are cached by the image's content id
// (PreparedImage::id, a SHA-256 of the file).
//
// Ownership: shares the VisionModel; the Backend (and a shared arena) must outlive the encoder.
// Thread-safety: as MediaEncoder: any thread.
#pragma once

#include <memory>
#include <vector>

#include "llm/media_encoder.h"
#include "llm/vision_model.h"

namespace kiln {

using VisionEncoderOptions = EncoderOptions;

class VisionEncoder {
 public:
  static Result<std::unique_ptr<VisionEncoder>> create(std::shared_ptr<const VisionModel> model,
                                                       Backend& backend, const VisionEncoderOptions& options);

  // The embeddings of `image`: from the cache when an image of the same id was encoded, else
  // computed (and cached). Errors come from the backend only.
  Result<std::shared_ptr<const ImageEmbeddings>> encode(const PreparedImage& image);

  const VisionModel& model() const { return *model_; }
  // The owner of the encoder's weights and inputs on its device.
  OwnerId owner() const { return core_->owner(); }
  // The mmproj's tensors on the device (MediaEncoder::weights).
  const DeviceWeights& weights() const { return core_->weights(); }
  const ComputeArena& arena() const { return core_->arena(); }
  // Compute-arena bytes the encoder's largest graph needs.
  size_t worst_case_arena_bytes() const { return core_->worst_case_arena_bytes(); }
  MediaEncoder::CacheStats cache_stats() const { return core_->cache_stats(); }

 private:
  VisionEncoder() = default;
  // What a pass's inputs point into: it must outlive the pass.
  struct Staging {
    EncoderGraph graph;          // its constant inputs' values
    std::vector<float> patches;  // image_to_patches() of the image
  };
  // The graph of an image of `width` x `height` prepared pixels (`image`, null for the worst case:
  // its patches are left unfilled).
  Result<EncoderPass> build(Graph& g, int32_t width, int32_t height, const PreparedImage* image,
                            Staging& staging) const;

  std::shared_ptr<const VisionModel> model_;
  AttentionPath attention_ = AttentionPath::Flash;
  std::unique_ptr<MediaEncoder> core_;
};

}  // namespace kiln
