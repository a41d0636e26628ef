#include "llm/speculative/ngram_simple.h"

#include <algorithm>
#include <cstddef>

namespace kiln {

// ref: llama.cpp common/ngram-map.cpp common_ngram_simple_draft.
std::vector<int32_t> ngram_simple_draft(int32_t size_n, int32_t size_m, std::span<const int32_t> history,
                                        int32_t sampled) {
  const size_t len = history.size();
  const auto n = static_cast<size_t>(size_n);
  const auto m = static_cast<size_t>(size_m);
  if (len <= n + m + 1) return {};
  // pattern = history[len - n + 1, len) + sampled
  auto matches_at = [&](size_t j) {
    for (size_t k = 0; k + 1 < n; ++k) {
      if (history[j + k] != history[len - n + 1 + k]) return false;
    }
    return history[j + n - 1] == sampled;
  };
  size_t match = 0;
  for (size_t j = len - n - 1; j > 0; --j) {
    if (matches_at(j)) {
      match = j;
      break;
    }
  }
  if (match == 0) return {};
  const size_t count = std::min(m, len - (match + n));
  if (count < n) return {};
  const auto first = history.begin() + static_cast<std::ptrdiff_t>(match + n);
  return {first, first + static_cast<std::ptrdiff_t>(count)};
}

}  // namespace kiln
