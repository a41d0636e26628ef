// VisionEncoder: runs a VisionModel on a Backend: PreparedImage in, embeddings out (one row of the
// text model's n_embd floats per image token), as llama.cpp's mtmd_encode.
//
// Memory: the encoder plans its graphs in a ComputeArena it does not own (normally the text
// Context's, VisionEncoderOptions::arena), reserving its worst case there at creation, so encoder
// and decoder take turns on one arena sized for the larger of the two, not their sum. Without a
// shared arena it makes its own. It runs on any device the text decoder runs on: its weights (the
// mmproj placed on the backend's device by DeviceWeights: read in place in the mapping on a host
// device, copied onto another) and its input buffer (the patches of one image) are residents of
// an owner of their own (llm/vision_memory.h: owner()), evicted when cold and restored for the
// next image; each graph is built over the mapping and pointed at the placed tensors while they
// are pinned. The device's kernels give the host's bits (sim devices run the host kernels). The
// embedding cache is host memory.
//
// Cache: embeddings are kept by the image's content id (PreparedImage::id, a SHA-256 of the file),
// least recently used first out, so a conversation that sends one image every turn encodes it
// once.
//
// Ownership: shares the VisionModel; the Backend (and a shared arena) must outlive the encoder.
// Thread-safety: every public method takes the encoder's mutex, pins its own owner and the
// arena's (a shared arena that is a model's resident: ComputeArena::resident_owner) and then
// takes the arena's turn while it computes.
#pragma once

#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "llm/context.h"
#include "llm/vision_memory.h"
#include "llm/vision_model.h"
#include "runtime/backend.h"
#include "runtime/planner.h"
#include "runtime/residency.h"

namespace kiln {

struct ImageEmbeddings {
  std::string id;           // the image's content id
  int64_t n_tokens = 0;     // rows
  int64_t n_embd = 0;       // floats per row (the text model's n_embd)
  std::vector<float> data;  // [n_tokens][n_embd]
  bool non_causal = false;  // the decoder lets these tokens see each other both ways
  std::span<const float> row(int64_t i) const {
    return {data.data() + static_cast<size_t>(i * n_embd), static_cast<size_t>(n_embd)};
  }
};

struct VisionEncoderOptions {
  // Attention arithmetic, as llama.cpp's clip: Auto and On use flash attention (K and V in F16),
  // Off the plain F32 path.
  FlashAttention flash_attention = FlashAttention::Auto;
  ComputeArena* arena = nullptr;  // shared arena on the backend's device; null: the encoder's own
  size_t cache_images = 16;       // images whose embeddings are kept (0: no cache)
  WeightOptions weights = {};     // how the mmproj's weights are held and prepared (the model's, usually)
};

class VisionEncoder {
 public:
  static Result<std::unique_ptr<VisionEncoder>> create(std::shared_ptr<const VisionModel> model,
                                                       Backend& backend, const VisionEncoderOptions& options);

  // The embeddings of `image`: from the cache when an image of the same id was encoded, else
  // computed (and cached). Errors come from the backend only.
  Result<std::shared_ptr<const ImageEmbeddings>> encode(const PreparedImage& image);

  const VisionModel& model() const { return *model_; }
  // The owner of the encoder's weights and inputs on its device.
  OwnerId owner() const { return memory_->owner(); }
  // The mmproj's tensors on the device: the ones its graphs read only as mul_mat weights in the
  // kernels' layouts (ops/weight_prep.h), the others plain. Views valid while the owner is pinned.
  const DeviceWeights& weights() const { return memory_->weights(); }
  const ComputeArena& arena() const { return *arena_; }
  // Compute-arena bytes the encoder's largest graph needs.
  size_t worst_case_arena_bytes() const { return worst_bytes_; }
  struct CacheStats {
    uint64_t encoded = 0;  // images computed
    uint64_t hits = 0;     // images served from the cache
    size_t images = 0;     // images held now
  };
  CacheStats cache_stats() const;

 private:
  VisionEncoder() = default;
  Result<std::shared_ptr<const ImageEmbeddings>> run(
      const PreparedImage& image);  // under mutex_ and the turn
  // Keeps the shared arena's owner on the device (an empty pin without one or without a manager).
  Result<ResidencyManager::Pin> pin_arena() const;
  void remember(std::shared_ptr<const ImageEmbeddings> e);  // under mutex_

  std::shared_ptr<const VisionModel> model_;
  Backend* backend_ = nullptr;
  VisionEncoderOptions opt_;
  AttentionPath attention_ = AttentionPath::Flash;
  std::unique_ptr<ComputeArena> own_arena_;
  ComputeArena* arena_ = nullptr;
  size_t worst_bytes_ = 0;
  std::unique_ptr<VisionMemory> memory_;  // weights and the largest graph's inputs
  std::vector<float> stage_;              // host staging of the patches
  // LRU cache: most recent first.
  std::list<std::shared_ptr<const ImageEmbeddings>> lru_;
  std::unordered_map<std::string, std::list<std::shared_ptr<const ImageEmbeddings>>::iterator> by_id_;
  CacheStats stats_;
  mutable std::mutex mutex_;
};

}  // namespace kiln
