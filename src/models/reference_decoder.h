// ReferenceDecoder: the plain forward pass of a llama / qwen2 / qwen3 file over one sequence,
// one kernel call at a time on the host (single-threaded, no graph, no planner): small enough to
// read in one sitting. It is the oracle the graph path and its KV cache are tested against
// (DESIGN.md § Models to learn from: llama2.c), and a way to run a model when nothing else is
// set up.
// Ownership: holds views into `file`'s mapping; the GgufFile must outlive the decoder.
// Thread-safety: one caller at a time.
#pragma once

#include <memory>
#include <span>
#include <vector>

#include "core/gguf.h"
#include "models/hparams.h"
#include "models/modules.h"
#include "ops/op.h"

namespace kiln {

struct ReferenceDecoderOptions {
  int64_t n_ctx = 512;                            // KV cache length in tokens
  DType kv_type = DType::F32;                     // F32 or F16
  AttentionPath attention = AttentionPath::Plain;
};

class ReferenceDecoder {
 public:
  static Result<std::unique_ptr<ReferenceDecoder>> create(const GgufFile& file,
                                                          const ReferenceDecoderOptions& options);

  // Appends `tokens` at positions n_past().. and returns their logits, [tokens.size()][n_vocab]
  // flattened. Errors: token id outside the vocabulary, or the context would overflow.
  Result<std::vector<float>> decode(std::span<const int32_t> tokens);
  int64_t n_past() const { return n_past_; }
  void reset() { n_past_ = 0; }
  const HParams& hparams() const { return hp_; }

 private:
  ReferenceDecoder() = default;
  void run(const OpCall& call);  // plans, then runs every phase over all units
  // New F32 tensor [ne0, ne1, ne2] backed by a buffer owned by this decode call.
  TensorView f32(std::vector<std::vector<float>>& arena, int64_t ne0, int64_t ne1, int64_t ne2 = 1);
  TensorView rms_norm_mul(std::vector<std::vector<float>>& arena, const TensorView& x, const Weight& w);
  TensorView linear(std::vector<std::vector<float>>& arena, const Weight& w, const Weight& bias,
                    const TensorView& x);

  HParams hp_;
  DecoderWeights w_;
  ReferenceDecoderOptions opt_;
  int64_t n_past_ = 0;
  // KV cache per layer: K [head_dim_k, n_ctx, n_head_kv], V [head_dim_v, n_ctx, n_head_kv].
  std::vector<std::vector<uint8_t>> k_cache_, v_cache_;
  std::vector<uint8_t> scratch_;
};

}  // namespace kiln
