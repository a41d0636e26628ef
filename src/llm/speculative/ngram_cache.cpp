#include "llm/speculative/ngram_cache.h"

namespace kiln {
namespace {

constexpr int32_t kNull = -1;
// ref: llama.cpp common/ngram-cache.cpp draft_min_sample_size_lax / draft_min_percent_lax, by
// n-gram length - 1: the context counts must have this many samples and the best token this
// share of them.
constexpr std::array<int32_t, NgramCacheDrafter::kMaxNgram> kMinSamples = {2, 2, 1, 1};
constexpr std::array<int32_t, NgramCacheDrafter::kMaxNgram> kMinPercent = {66, 50, 50, 50};

}  // namespace

size_t NgramCacheDrafter::NgramHash::operator()(const Ngram& g) const {
  size_t h = 0;
  for (int32_t t : g.tokens) h = (h ^ static_cast<uint32_t>(t)) * 0x9E3779B97F4A7C15ull;
  return h;
}

// ref: llama.cpp common_ngram_cache_update, with the whole of `tokens` new: every n-gram that
// lies inside `tokens` (none spans from earlier calls' tokens, as in llama.cpp), lengths 1..4
// in turn, positions in order.
void NgramCacheDrafter::update(std::span<const int32_t> tokens) {
  const auto size = static_cast<int64_t>(tokens.size());
  for (int64_t n = 1; n <= kMaxNgram; ++n) {
    for (int64_t i = n; i < size; ++i) {
      Ngram g;
      g.tokens.fill(kNull);
      for (int64_t j = 0; j < n; ++j)
        g.tokens[static_cast<size_t>(j)] = tokens[static_cast<size_t>(i - n + j)];
      ++context_[g][tokens[static_cast<size_t>(i)]];
    }
  }
}

// ref: llama.cpp try_draft (context cache, lax thresholds, no static cache): the longest n-gram
// whose counts pass the thresholds proposes its most frequent token.
int32_t NgramCacheDrafter::propose(std::span<const Ngram> ngrams) const {
  for (size_t i = ngrams.size(); i-- > 0;) {
    const auto it = context_.find(ngrams[i]);
    if (it == context_.end()) continue;
    int32_t best = kNull, best_count = 0, sum = 0;
    for (const auto& [token, count] : it->second) {
      if (count > best_count) {
        best = token;
        best_count = count;
      }
      sum += count;
    }
    if (sum < kMinSamples[i] || 100 * best_count < kMinPercent[i] * sum) continue;
    return best;
  }
  return kNull;
}

// ref: llama.cpp common_speculative_impl_ngram_cache::draft_one and common_ngram_cache_draft.
std::vector<int32_t> NgramCacheDrafter::draft(std::span<const int32_t> history, int32_t sampled) {
  if (counted_ < history.size() + 1) {
    std::vector<int32_t> fresh(history.begin() + static_cast<std::ptrdiff_t>(counted_), history.end());
    fresh.push_back(sampled);
    update(fresh);
    counted_ = history.size() + 1;
  }
  // The text is history + sampled + the draft so far; n-grams end at its last token.
  const auto text_len = static_cast<int64_t>(history.size()) + 1;
  std::vector<int32_t> out;
  if (text_len < 2) return out;
  auto token_at = [&](int64_t j) -> int32_t {
    if (j < 0) return kNull;  // before the text (llama.cpp reads out of bounds here)
    if (j < text_len - 1) return history[static_cast<size_t>(j)];
    if (j == text_len - 1) return sampled;
    return out[static_cast<size_t>(j - text_len)];
  };
  std::array<Ngram, kMaxNgram> ngrams;
  while (static_cast<int>(out.size()) < kDraftMax) {
    const int64_t end = text_len + static_cast<int64_t>(out.size());
    for (int n = 1; n <= kMaxNgram; ++n) {
      Ngram& g = ngrams[static_cast<size_t>(n - 1)];
      g.tokens.fill(kNull);
      for (int j = 0; j < n; ++j) g.tokens[static_cast<size_t>(j)] = token_at(end - n + j);
    }
    const int32_t token = propose(ngrams);
    if (token == kNull) break;
    out.push_back(token);
  }
  return out;
}

}  // namespace kiln
