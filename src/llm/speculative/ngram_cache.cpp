#include "llm/speculative/ngram_cache.h"

#include <array>

namespace kiln {
namespace {

using Ngram = NgramCounts::Ngram;
constexpr int32_t kNull = NgramCounts::kNoToken;
constexpr int kMaxNgram = NgramCounts::kMaxNgram;
using Thresholds = std::array<int64_t, kMaxNgram>;

// ref: llama.cpp common/ngram-cache.cpp, by n-gram length - 1: a cache's counts must have this
// many samples and the best token this share (percent) of them. The context uses the lax ones,
// the dynamic cache the strict ones, the static cache alone the lax ones of its 2-grams.
constexpr Thresholds kLaxSamples = {2, 2, 1, 1};
constexpr Thresholds kLaxPercent = {66, 50, 50, 50};
constexpr Thresholds kStrictSamples = {4, 3, 2, 2};
constexpr Thresholds kStrictPercent = {75, 66, 66, 66};

// ref: llama.cpp try_draft (primary cache): the longest of `ngrams` whose counts in `primary` pass
// the thresholds proposes its best token, each candidate's count weighed by 100 x its count after
// the static 2-gram (1 when the static cache has none). Products in 64 bits (llama.cpp's int32
// overflows on a large corpus' counts).
int32_t propose(const NgramCounts& primary, std::span<const Ngram> ngrams, const NgramCounts::Following* fixed,
                const Thresholds& min_samples, const Thresholds& min_percent) {
  for (size_t i = ngrams.size(); i-- > 0;) {
    const NgramCounts::Following* following = primary.find(ngrams[i]);
    if (following == nullptr) continue;
    int32_t best = kNull;
    int64_t best_count = 0, best_weight = 0, sum = 0;
    for (const auto& [token, count] : *following) {
      int64_t weight = 1;
      if (fixed != nullptr) {
        const auto it = fixed->find(token);
        if (it != fixed->end()) weight = int64_t{100} * it->second;
      }
      if (count * weight > best_count * best_weight) {
        best = token;
        best_count = count;
        best_weight = weight;
      }
      sum += count;
    }
    if (sum < min_samples[i] || 100 * best_count < min_percent[i] * sum) continue;
    return best;
  }
  return kNull;
}

// ref: llama.cpp try_draft (static cache alone): the most frequent token after the 2-gram, with
// the lax thresholds of 2-grams.
int32_t propose_static(const NgramCounts::Following* fixed) {
  if (fixed == nullptr) return kNull;
  int32_t best = kNull;
  int64_t best_count = 0, sum = 0;
  for (const auto& [token, count] : *fixed) {
    if (count > best_count) {
      best = token;
      best_count = count;
    }
    sum += count;
  }
  constexpr size_t i = NgramCacheDrafter::kStaticNgram - 1;
  if (sum < kLaxSamples[i] || 100 * best_count < kLaxPercent[i] * sum) return kNull;
  return best;
}

}  // namespace

// ref: llama.cpp common_speculative_impl_ngram_cache::draft_one and common_ngram_cache_draft.
std::vector<int32_t> NgramCacheDrafter::draft(std::span<const int32_t> history, int32_t sampled) {
  // The tokens since the last call, and `sampled`, are counted on their own: no n-gram spans from
  // earlier calls' tokens (llama.cpp's server counts so).
  if (counted_ < history.size() + 1) {
    std::vector<int32_t> fresh(history.begin() + static_cast<std::ptrdiff_t>(counted_), history.end());
    fresh.push_back(sampled);
    context_.add(fresh, 1, kMaxNgram, fresh.size());
    counted_ = history.size() + 1;
  }
  // The text is history + sampled + the draft so far; n-grams end at its last token.
  const auto text_len = static_cast<int64_t>(history.size()) + 1;
  std::vector<int32_t> out;
  if (text_len < kStaticNgram) return out;
  auto token_at = [&](int64_t j) -> int32_t {
    if (j < 0) return kNull;  // before the text (llama.cpp reads out of bounds here)
    if (j < text_len - 1) return history[static_cast<size_t>(j)];
    if (j == text_len - 1) return sampled;
    return out[static_cast<size_t>(j - text_len)];
  };
  auto ngram_ending_at = [&](int64_t end, int n) {
    Ngram g;
    g.tokens.fill(kNull);
    for (int j = 0; j < n; ++j) g.tokens[static_cast<size_t>(j)] = token_at(end - n + j);
    return g;
  };
  std::array<Ngram, kMaxNgram> ngrams;
  while (static_cast<int>(out.size()) < kDraftMax) {
    const int64_t end = text_len + static_cast<int64_t>(out.size());
    const NgramCounts::Following* fixed =
        static_ != nullptr ? static_->find(ngram_ending_at(end, kStaticNgram)) : nullptr;
    for (int n = 1; n <= kMaxNgram; ++n) ngrams[static_cast<size_t>(n - 1)] = ngram_ending_at(end, n);
    int32_t token = propose(context_, ngrams, fixed, kLaxSamples, kLaxPercent);
    if (token == kNull && dynamic_ != nullptr) token = propose(*dynamic_, ngrams, fixed, kStrictSamples, kStrictPercent);
    if (token == kNull) token = propose_static(fixed);
    if (token == kNull) break;
    out.push_back(token);
  }
  return out;
}

}  // namespace kiln
