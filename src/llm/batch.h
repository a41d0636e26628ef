// Batch: tokens to decode together, each with its position, sequence and whether its logits are
// wanted. Tokens of several sequences may be mixed in any order; a Context splits a batch into
// micro-batches. Results never depend on how a batch is composed.
#pragma once

#include <cstdint>
#include <vector>

namespace kiln {

struct Batch {
  std::vector<int32_t> tokens;
  std::vector<int32_t> pos;
  std::vector<int32_t> seq;
  std::vector<uint8_t> output;  // 1: compute this token's logits

  void add(int32_t token, int32_t position, int32_t sequence, bool want_logits) {
    tokens.push_back(token);
    pos.push_back(position);
    seq.push_back(sequence);
    output.push_back(want_logits ? 1 : 0);
  }
  void clear() {
    tokens.clear();
    pos.clear();
    seq.clear();
    output.clear();
  }
  size_t size() const { return tokens.size(); }
};

}  // namespace kiln
