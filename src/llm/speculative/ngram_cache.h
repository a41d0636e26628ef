// ngram-cache drafting: llama.cpp's lookup decoding. Counts of the tokens that followed every
// 1- to 4-gram propose, token by token, the continuation the largest matching n-gram predicts with
// enough support: first from the context's counts, then from a dynamic cache of earlier
// generations (stricter thresholds), then from a static cache of a corpus alone; the static
// cache's 2-gram counts also weigh the candidates of the other two (ref: common/ngram-cache.cpp
// common_ngram_cache_draft and the ngram-cache source of common/speculative.cpp in the reference
// release; this follows their thresholds, update order and tie-breaking so that drafts equal
// llama.cpp's).
// State per sequence; not thread-safe. The dynamic and static counts are shared read-only.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "llm/speculative/ngram_counts.h"

namespace kiln {

class NgramCacheDrafter {
 public:
  static constexpr int kDraftMax = 8;  // tokens per draft (fixed in llama.cpp)
  static constexpr int kStaticNgram = 2;  // the static cache's n-grams are 2-grams (LLAMA_NGRAM_STATIC)

  // `dynamic`, `fixed`: the -lcd and -lcs counts (null: none); must outlive the drafter.
  explicit NgramCacheDrafter(const NgramCounts* dynamic = nullptr, const NgramCounts* fixed = nullptr)
      : dynamic_(dynamic), static_(fixed) {}

  // The draft after `history` + `sampled`; first counts the n-grams of the tokens appended since
  // the last call.
  std::vector<int32_t> draft(std::span<const int32_t> history, int32_t sampled);

 private:
  NgramCounts context_;
  size_t counted_ = 0;  // tokens of the text counted so far
  const NgramCounts* dynamic_;
  const NgramCounts* static_;
};

}  // namespace kiln
