#include "llm/speculative/ngram_mod.h"

#include <algorithm>

namespace kiln {

NgramModTable::NgramModTable(int32_t n, size_t size) : n_(static_cast<size_t>(n)), entries_(size, kEmpty) {}

// ref: llama.cpp common_ngram_mod::idx: a 64-bit LCG over the tokens, modulo the table size.
size_t NgramModTable::index(const int32_t* tokens) const {
  uint64_t h = 0;
  for (size_t i = 0; i < n_; ++i)
    h = h * 6364136223846793005ull + static_cast<uint64_t>(static_cast<int64_t>(tokens[i]));
  return static_cast<size_t>(h % entries_.size());
}

void NgramModTable::add(const int32_t* tokens) {
  int32_t& e = entries_[index(tokens)];
  if (e == kEmpty) ++used_;
  e = tokens[n_];
}

int32_t NgramModTable::get(const int32_t* tokens) const { return entries_[index(tokens)]; }

void NgramModTable::reset() {
  std::fill(entries_.begin(), entries_.end(), kEmpty);
  used_ = 0;
}

// ref: llama.cpp common_speculative_impl_ngram_mod::begin.
void NgramModDrafter::begin(std::span<const int32_t> history) {
  indexed_ = 0;
  last_draft_ = 0;
  const size_t n = table_->n();
  if (history.size() < n) return;
  for (size_t i = 0; i < history.size() - n; ++i) table_->add(history.data() + i);
  indexed_ = history.size() - n;
  if (table_->occupancy() > 0.25) table_->reset();
}

// ref: llama.cpp common_speculative_impl_ngram_mod::draft_one.
std::vector<int32_t> NgramModDrafter::draft(std::span<const int32_t> history, int32_t sampled) {
  last_draft_ = 0;
  const size_t n = table_->n();
  const size_t len = history.size();
  if (len < n) return {};
  // New n-grams join the table in chunks of more than 32 tokens.
  if (indexed_ + 32 < len) {
    for (size_t i = indexed_; i < len - n; ++i) table_->add(history.data() + i);
    indexed_ = len - n;
  }
  // chain = the last n - 1 tokens, sampled, then each looked-up token in turn.
  const auto n_max = static_cast<size_t>(options_.n_max);
  std::vector<int32_t> chain(history.end() - static_cast<std::ptrdiff_t>(n - 1), history.end());
  chain.push_back(sampled);
  chain.reserve(n + n_max);
  for (size_t i = 0; i < n_max; ++i) {
    const int32_t token = table_->get(chain.data() + i);
    if (token == NgramModTable::kEmpty) {
      if (i < static_cast<size_t>(options_.n_min)) return {};
      break;
    }
    chain.push_back(token);
  }
  std::vector<int32_t> out(chain.begin() + static_cast<std::ptrdiff_t>(n), chain.end());
  last_draft_ = out.size();
  return out;
}

// ref: llama.cpp common_speculative_impl_ngram_mod::accept.
void NgramModDrafter::accept(int32_t n_accepted) {
  if (last_draft_ == 0) return;
  if (static_cast<double>(n_accepted) / static_cast<double>(last_draft_) < 0.25) {
    if (++low_streak_ >= 5) {
      table_->reset();
      low_streak_ = 0;
      indexed_ = 0;
    }
  } else {
    low_streak_ = 0;
  }
}

}  // namespace kiln
