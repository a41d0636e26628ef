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
  // Optional per-dimension rope frequency factors [n_rot / 2] (Llama 3.1): the file's one tensor,
  // in every block, so that each layer reads it on its own device when a model is split.
  Weight rope_freqs;
};

struct DecoderWeights {
  Weight tok_embd;     // [n_embd, n_vocab]
  std::vector<Block> blocks;
  Weight output_norm;  // [n_embd]
  Weight output;       // [n_embd, n_vocab]; the token embedding when the file ties them
  bool tied_output = false;
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

// The layer a weight slot belongs to: kInputLayer for the token embedding, 0..n_layer-1 for a
// block's, n_layer (the output layer, as llama.cpp counts it) for the output norm and head.
inline constexpr int64_t kInputLayer = -1;

// Calls fn(weight, use, layer) for every weight slot of `w` (DecoderWeights, const or not), present
// or not, in a fixed order: two DecoderWeights of one model visit the same slots in the same order.
template <class Weights, class Fn>
void for_each_weight_slot(Weights& w, Fn&& fn) {
  fn(w.tok_embd, WeightUse::Rows, kInputLayer);
  int64_t il = 0;
  for (auto& blk : w.blocks) {
    fn(blk.rope_freqs, WeightUse::Elementwise, il);
    fn(blk.attn_norm, WeightUse::Elementwise, il);
    for (auto* m : {&blk.attn.wq, &blk.attn.wk, &blk.attn.wv, &blk.attn.wo}) fn(*m, WeightUse::MatMul, il);
    for (auto* v : {&blk.attn.bq, &blk.attn.bk, &blk.attn.bv, &blk.attn.q_norm, &blk.attn.k_norm})
      fn(*v, WeightUse::Elementwise, il);
    fn(blk.ffn_norm, WeightUse::Elementwise, il);
    for (auto* m : {&blk.mlp.gate, &blk.mlp.up, &blk.mlp.down}) fn(*m, WeightUse::MatMul, il);
    ++il;
  }
  const auto n_layer = static_cast<int64_t>(w.blocks.size());
  fn(w.output_norm, WeightUse::Elementwise, n_layer);
  fn(w.output, WeightUse::MatMul, n_layer);
}

// Calls fn(weight, use) for every present weight of `w` in for_each_weight_slot's order. A tied
// output is visited as well as the token embedding whose tensor it shares; the rope frequency
// factors once per block.
template <class Weights, class Fn>
void for_each_weight(Weights& w, Fn&& fn) {
  for_each_weight_slot(w, [&fn](auto& weight, WeightUse use, int64_t) {
    if (weight) fn(weight, use);
  });
}

}  // namespace kiln
