// The forward graph of a llama / qwen2 / qwen3 decoder for one micro-batch, built on
// runtime/graph.h. One builder serves the three architectures: their differences are data
// (hparams and which optional tensors the file has: biases, q/k norms, frequency factors).
#pragma once

#include <vector>

#include "core/result.h"
#include "models/hparams.h"
#include "models/modules.h"
#include "runtime/graph.h"

namespace kiln {

// Where a layer's KV cache lives: [n_embd_k_gqa, n_ctx] and [n_embd_v_gqa, n_ctx] views on the
// executing device (see llm/kv_cache.h for the layout).
struct KvLayerMemory {
  TensorView k;
  TensorView v;
};

// What the graph computes for its output rows.
enum class DecoderOutput : uint8_t {
  Logits,      // the LM head's logits
  Embeddings,  // the hidden state after the output norm (llama.cpp's result_norm, the LM head's
               // input); the LM head is not computed
};

struct DecoderGraphSpec {
  int64_t n_tokens = 1;   // tokens in the micro-batch
  int64_t n_outputs = 1;  // rows whose outputs are computed
  // Cells attention reads: [0, n_kv), covering the cells the batch is written to (kv_cells). The
  // cells themselves are an input, so one graph serves every step with these sizes (a context
  // pads n_kv to keep it fixed while the cache grows: llm/context.h).
  int64_t n_kv = 1;
  AttentionPath attention = AttentionPath::Plain;
  DecoderOutput output = DecoderOutput::Logits;
  // The micro-batch enters as embeddings (F32 [n_embd, n_tokens], e.g. an image's) instead of
  // token ids looked up in the token embedding.
  bool embeddings_input = false;
  // Every row computed in the float order of a micro-batch of that one token (OpParams
  // single_row_order on the matrix products and attention): its outputs and K/V are then the
  // bits of the token decoded alone.
  bool single_row_order = false;

  // Equal specs build graphs of the same shape (every field is part of it).
  bool operator==(const DecoderGraphSpec&) const = default;
};

// Inputs the caller binds before each execution, and the output it reads.
struct DecoderGraph {
  Tensor tokens;     // I32 [n_tokens] (invalid with embeddings_input)
  Tensor input_embd; // F32 [n_embd, n_tokens] (embeddings_input; else invalid)
  Tensor positions;  // I32 [n_tokens]
  Tensor kv_cells;   // I32 [n_tokens]: the cache cell each token's K and V are written to, < n_kv
  Tensor kq_mask;    // F32 [n_kv, n_tokens]: 0 visible, -inf hidden (llm/kv_cache.h fill_mask)
  Tensor out_rows;   // I32 [n_outputs]: batch rows whose outputs are wanted, ascending
  Tensor logits;     // F32 [n_vocab, n_outputs] (DecoderOutput::Logits; else invalid)
  Tensor embeddings; // F32 [n_embd, n_outputs] (DecoderOutput::Embeddings; else invalid)
};

// Adds the decoder to `g` (which should be empty) and marks its output (spec.output) as output.
// Weights and `kv` must be addressable on the executing device (host memory for host backends);
// the graph keeps their addresses (rebuild it when they move).
Result<DecoderGraph> build_decoder_graph(Graph& g, const HParams& hp, const DecoderWeights& w,
                                         const std::vector<KvLayerMemory>& kv, const DecoderGraphSpec& spec);

}  // namespace kiln
