// ngram-simple drafting: a stateless function of the token history (llama.cpp's
// common_ngram_simple_draft in the reference release, which has no check rate).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace kiln {

// The n-gram of the last size_n - 1 tokens of `history` followed by `sampled` is searched for
// backwards in `history` (from position len - size_n - 1 down to 1: position 0 never matches);
// at the first match p, the draft is history[p + size_n, p + size_n + c) with c = min(size_m,
// len - p - size_n). No draft (empty) when len <= size_n + size_m + 1, when nothing matches or
// when c < size_n. size_n, size_m >= 1.
std::vector<int32_t> ngram_simple_draft(int32_t size_n, int32_t size_m, std::span<const int32_t> history,
                                        int32_t sampled);

}  // namespace kiln
