// Embedder: computes the server's embeddings (POST /v1/embeddings, /embeddings), one request at a
// time, in a Context of its own.
//
// Why not the completion Engine's Context: that one holds the slots' KV cache and outputs logits,
// and its engine thread owns it; an embedding pass needs hidden states (no LM head) and would evict
// the slots' cached prompts. The Embedder's context shares the model's DeviceWeights, the server's
// thread pool and the device's compute arena (DeviceRegistry::arena: embedding and generation
// take turns in it), and lives for one request only: its KV cache and input buffer are sized to
// that request's longest input, which the routes bound by a slot's context (so its worst case,
// at most n_ubatch rows over n_ctx cells and no LM head, stays within what the engine's context
// reserved there; a larger one would grow the arena for good). Memory is therefore bounded, and nothing of the request stays allocated after it.
// Thread-safety: embed() may be called from any thread; calls are serialized by a mutex.
#pragma once

#include <mutex>
#include <span>
#include <vector>

#include "core/result.h"
#include "llm/embeddings.h"
#include "serve/server_state.h"

namespace kiln::serve {

// The pooling a server uses: --pooling when given, else the model's (llm/embeddings.h); an Error
// for a bad --pooling value or a model kiln cannot embed with (rank pooling, non-causal).
Result<Pooling> server_pooling(const ServerOptions& options, const Model& model);

class Embedder {
 public:
  // One vector per input, in order: with Pooling::None every token's hidden state, raw,
  // [n_tokens][n_embd] flattened (as llama-server, which normalises only pooled vectors); else
  // the pooled vector, [n_embd], scaled to Euclidean norm 1. Each input holds 1 .. any valid
  // token ids (the caller bounds the lengths). `base` gives the cache types and attention path.
  Result<std::vector<std::vector<float>>> embed(const ServerState& st,
                                                std::span<const std::vector<int32_t>> inputs, Pooling pooling,
                                                const ContextOptions& base);

 private:
  std::mutex mutex_;
};

}  // namespace kiln::serve
