// MediaEncoder: what the vision and the audio encoder (llm/vision_encoder.h, llm/audio_encoder.h)
// share: one mmproj encoder graph run on a Backend, as a resident of an owner of its own, in a
// compute arena shared with the text model, with an embedding cache keyed by content id. The
// caller builds the graph (BuildPass); this class places it and runs it.
//
// Memory: the graphs are planned in a ComputeArena the encoder does not own (normally the device's
// one arena, EncoderOptions::arena, where the text Context, the vision and the audio encoder take
// turns), reserving the largest graph there at creation, so the arena is the largest of their worst
// cases, not their sum. Without a shared arena the encoder makes its own. The mmproj's tensors
// (placed on the backend's device by DeviceWeights: read in place in the mapping on a host device,
// mul_mat weights prepared in the kernels' layouts, all copied onto another device) and the input
// buffer of the largest graph are residents of the owner (llm/encoder_memory.h: owner()), evicted
// when cold and restored (bit for bit) for the next input; each graph is built over the mapping and
// pointed at the placed tensors while they are pinned. The embedding cache is host memory.
//
// Cache: embeddings are kept by id (a SHA-256 content id of the media file, with the chunk's index
// for audio), least recently used first out, so a conversation that sends one file every turn
// encodes it once.
//
// Ownership: shares the mmproj's file; the Backend (and a shared arena) must outlive the encoder.
// Thread-safety: encode() and cache_stats() take the encoder's mutex; encode() pins the owner and
// the arena's (a shared arena that is a model's resident: ComputeArena::resident_owner) and then
// takes the arena's turn while it computes.
#pragma once

#include <cstdint>
#include <functional>
#include <list>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "llm/context.h"
#include "llm/encoder_memory.h"
#include "llm/graph_pass.h"
#include "runtime/backend.h"
#include "runtime/planner.h"
#include "runtime/residency.h"

namespace kiln {

// An encoder's output for one image or audio chunk.
struct ImageEmbeddings {
  std::string id;           // the input's content id
  int64_t n_tokens = 0;     // rows
  int64_t n_embd = 0;       // floats per row (the text model's n_embd)
  std::vector<float> data;  // [n_tokens][n_embd]
  bool non_causal = false;  // the decoder lets these tokens see each other both ways
  std::span<const float> row(int64_t i) const {
    return {data.data() + static_cast<size_t>(i * n_embd), static_cast<size_t>(n_embd)};
  }
};

struct EncoderOptions {
  // Attention arithmetic, as llama.cpp's clip: Auto and On use flash attention (K and V in F16),
  // Off the plain F32 path.
  FlashAttention flash_attention = FlashAttention::Auto;
  ComputeArena* arena = nullptr;  // shared arena on the backend's device; null: the encoder's own
  size_t cache_entries = 16;      // inputs (images, audio chunks) whose embeddings are kept (0: no cache)
  WeightOptions weights = {};     // how the mmproj's weights are held and prepared (the model's, usually)
};

// One encoder graph as its builder made it.
struct EncoderPass {
  // Input tensors and the host bytes each takes, uploaded into the input buffer (llm/graph_pass.h).
  using Input = PassInput;
  std::vector<Input> inputs;
  Tensor embeddings;  // F32 [n_embd, n_tokens], marked as output
};
// Adds an encoder graph to an empty Graph, its weights externals named after their GGUF tensors
// (models/clip/vit.h's weight_tensor over the mmproj's mapping).
using BuildPass = std::function<Result<EncoderPass>(Graph&)>;

class MediaEncoder {
 public:
  // `mmproj`: the file whose tensors the graphs read (an aliasing pointer that keeps its model
  // alive); `owner`: the residents' owner name; `what`: the encoder's name in messages ("vision
  // encoder"); `worst`: builds the largest graph (it sizes the input buffer and the arena's
  // reservation, and decides which tensors take the kernels' layouts). Errors: the shared arena is
  // on another device, the device has no room (the manager's numbers), the graph reads a tensor the
  // file lacks.
  static Result<std::unique_ptr<MediaEncoder>> create(std::shared_ptr<const GgufFile> mmproj,
                                                      std::string owner, std::string what, Backend& backend,
                                                      const EncoderOptions& options, const BuildPass& worst);

  // The embeddings of the input `id`: from the cache when an input of the same id was encoded,
  // else computed with the graph `build` makes (and cached). `n_tokens`: the rows the prompt holds
  // for it (an Error if the graph makes another count); `non_causal` is copied to the result.
  // Errors come from the backend, or an input larger than the largest graph's.
  Result<std::shared_ptr<const ImageEmbeddings>> encode(const std::string& id, int64_t n_tokens,
                                                        bool non_causal, const BuildPass& build);

  OwnerId owner() const { return memory_->owner(); }
  // The mmproj's tensors on the device: the ones the graphs read only as mul_mat weights in the
  // kernels' layouts (ops/weight_prep.h), the others plain. Views valid while the owner is pinned.
  const DeviceWeights& weights() const { return memory_->weights(); }
  const ComputeArena& arena() const { return *arena_; }
  // Compute-arena bytes the largest graph needs.
  size_t worst_case_arena_bytes() const { return worst_bytes_; }
  struct CacheStats {
    uint64_t encoded = 0;  // inputs computed
    uint64_t hits = 0;     // inputs served from the cache
    size_t entries = 0;    // inputs held now
  };
  CacheStats cache_stats() const;

 private:
  MediaEncoder() = default;
  // Builds, places and runs one graph: under mutex_, the pins and the arena's turn.
  Result<std::shared_ptr<const ImageEmbeddings>> run(const std::string& id, int64_t n_tokens, bool non_causal,
                                                     const BuildPass& build);
  void remember(std::shared_ptr<const ImageEmbeddings> e);  // under mutex_

  std::string what_;
  Backend* backend_ = nullptr;
  size_t cache_entries_ = 0;
  std::unique_ptr<ComputeArena> own_arena_;
  ComputeArena* arena_ = nullptr;
  size_t worst_bytes_ = 0;
  std::unique_ptr<EncoderMemory> memory_;  // weights and the largest graph's inputs
  // LRU cache: most recent first.
  std::list<std::shared_ptr<const ImageEmbeddings>> lru_;
  std::unordered_map<std::string, std::list<std::shared_ptr<const ImageEmbeddings>>::iterator> by_id_;
  CacheStats stats_;
  mutable std::mutex mutex_;
};

}  // namespace kiln
