// Batch: tokens to decode together, each with its position, sequence and whether its logits are
// wanted. Tokens of several sequences may be mixed in any order; a Context splits a batch into
// micro-batches. Results never depend on how a batch is composed.
//
// A batch carries token ids or, for images and other media, embeddings: rows of the model's
// n_embd floats that enter the decoder where a token's embedding would (llama_batch's embd). One
// batch is all ids or all embeddings.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace kiln {

struct Batch {
  std::vector<int32_t> tokens;  // token ids; empty in a batch of embeddings
  std::vector<float> embd;      // [size()][n_embd] in a batch of embeddings; else empty
  std::vector<int32_t> pos;
  std::vector<int32_t> seq;
  std::vector<uint8_t> output;  // 1: compute this token's logits
  // false: every token sees all cached tokens of its sequence, the batch's later ones included
  // (an image's tokens under projectors whose images attend both ways, as llama.cpp's
  // llama_set_causal_attn(false)). Such a batch must fit one micro-batch (n_ubatch).
  bool causal = true;

  void add(int32_t token, int32_t position, int32_t sequence, bool want_logits) {
    tokens.push_back(token);
    push(position, sequence, want_logits);
  }
  // Appends one embedding row (n_embd floats).
  void add_embedding(std::span<const float> row, int32_t position, int32_t sequence, bool want_logits) {
    embd.insert(embd.end(), row.begin(), row.end());
    push(position, sequence, want_logits);
  }
  void clear() {
    tokens.clear();
    embd.clear();
    pos.clear();
    seq.clear();
    output.clear();
    causal = true;
  }
  size_t size() const { return pos.size(); }
  bool has_embeddings() const { return !embd.empty(); }

 private:
  void push(int32_t position, int32_t sequence, bool want_logits) {
    pos.push_back(position);
    seq.push_back(sequence);
    output.push_back(want_logits ? 1 : 0);
  }
};

}  // namespace kiln
