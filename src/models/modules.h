// Module structs that bind a decoder's GGUF tensors by name, with their expected shapes checked
// against the hyperparameters (one struct per block kind, as DESIGN.md § Layers describes).
// Shapes are in ggml order: ne[0] is the input (contracted) dimension of a weight matrix.
// Weights are non-owning views into the GGUF mapping, which must outlive the modules.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "core/gguf.h"
#include "core/result.h"
#include "models/hparams.h"

namespace kiln {

struct Weight {
  const GgufTensorInfo* info = nullptr;  // null for an absent optional tensor
  TensorView view;                       // read-only memory
  explicit operator bool() const { return info != nullptr; }
};

struct Attention {
  Weight wq;      // [n_embd, n_head * head_dim_k]
  Weight wk;      // [n_embd, n_head_kv * head_dim_k]
  Weight wv;      // [n_embd, n_head_kv * head_dim_v]
  Weight wo;      // [n_head * head_dim_v, n_embd]
  Weight bq, bk, bv;          // optional biases (qwen2): [rows of wq / wk / wv]
  Weight q_norm, k_norm;      // optional per-head RMS norms (qwen3): [head_dim_k]
};

struct Mlp {
  Weight gate;  // [n_embd, n_ff]
  Weight up;    // [n_embd, n_ff]
  Weight down;  // [n_ff, n_embd]
};

struct Block {
  Weight attn_norm;  // [n_embd]
  Attention attn;
  Weight ffn_norm;   // [n_embd]
  Mlp mlp;
};

struct DecoderWeights {
  Weight tok_embd;     // [n_embd, n_vocab]
  std::vector<Block> blocks;
  Weight output_norm;  // [n_embd]
  Weight output;       // [n_embd, n_vocab]; the token embedding when the file ties them
  bool tied_output = false;
  Weight rope_freqs;   // optional per-dimension frequency factors [n_rot / 2] (Llama 3.1)
};

// Binds every tensor the architecture needs; an Error names a missing or misshaped tensor.
Result<DecoderWeights> bind_decoder_weights(const GgufFile& file, const HParams& hp);

// How the decoder graph reads a weight, which decides the layouts it may be prepared in
// (ops/weight_prep.h).
enum class WeightUse : uint8_t {
  MatMul,       // the weight operand of mul_mat: the layout its kernels prefer
  Rows,         // rows picked by get_rows (the token embedding): plain
  Elementwise,  // norms, biases, rope frequency factors: plain
};

// Calls fn(weight, use) for every present weight of `w` (DecoderWeights, const or not) in a fixed
// order. A tied output is visited as well as the token embedding whose tensor it shares.
template <class Weights, class Fn>
void for_each_weight(Weights& w, Fn&& fn) {
  auto visit = [&fn](auto& weight, WeightUse use) {
    if (weight) fn(weight, use);
  };
  visit(w.tok_embd, WeightUse::Rows);
  visit(w.rope_freqs, WeightUse::Elementwise);
  for (auto& blk : w.blocks) {
    visit(blk.attn_norm, WeightUse::Elementwise);
    for (auto* m : {&blk.attn.wq, &blk.attn.wk, &blk.attn.wv, &blk.attn.wo}) visit(*m, WeightUse::MatMul);
    for (auto* v : {&blk.attn.bq, &blk.attn.bk, &blk.attn.bv, &blk.attn.q_norm, &blk.attn.k_norm})
      visit(*v, WeightUse::Elementwise);
    visit(blk.ffn_norm, WeightUse::Elementwise);
    for (auto* m : {&blk.mlp.gate, &blk.mlp.up, &blk.mlp.down}) visit(*m, WeightUse::MatMul);
  }
  visit(w.output_norm, WeightUse::Elementwise);
  visit(w.output, WeightUse::MatMul);
}

}  // namespace kiln
