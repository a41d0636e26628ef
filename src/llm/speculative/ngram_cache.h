// ngram-cache drafting: llama.cpp's lookup decoding. Counts of the tokens that followed every
// 1- to 4-gram of the context propose, token by token, the continuation the largest matching
// n-gram predicts with enough support (ref: common/ngram-cache.cpp and the ngram-cache source of
// common/speculative.cpp in the reference release; this follows its thresholds, update order and
// tie-breaking so that drafts equal llama.cpp's).
// State per sequence; not thread-safe.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <unordered_map>
#include <vector>

namespace kiln {

class NgramCacheDrafter {
 public:
  static constexpr int kMaxNgram = 4;  // n-grams of 1..4 tokens
  static constexpr int kDraftMax = 8;  // tokens per draft (fixed in llama.cpp)

  // The draft after `history` + `sampled`; first counts the n-grams of the tokens appended since
  // the last call.
  std::vector<int32_t> draft(std::span<const int32_t> history, int32_t sampled);

 private:
  struct Ngram {
    std::array<int32_t, kMaxNgram> tokens;  // unused tail: -1
    bool operator==(const Ngram&) const = default;
  };
  struct NgramHash {
    size_t operator()(const Ngram& g) const;
  };
  // Token -> times it followed the n-gram. Ties between tokens go to the first in this map's
  // iteration order, as in llama.cpp (same container, same insertion order).
  using Counts = std::unordered_map<int32_t, int32_t>;

  void update(std::span<const int32_t> tokens);
  int32_t propose(std::span<const Ngram> ngrams) const;

  std::unordered_map<Ngram, Counts, NgramHash> context_;
  size_t counted_ = 0;  // history tokens counted so far (plus the sampled token of the last call)
};

}  // namespace kiln
