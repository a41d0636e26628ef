#include "llm/speculative/ngram_map.h"

#include <algorithm>

namespace kiln {
namespace {

// ref: llama.cpp common_ngram_map_hash: an LCG over the n-gram's tokens, in 32 bits.
uint32_t ngram_hash(std::span<const int32_t> tokens, size_t start, size_t n) {
  uint32_t h = 0;
  for (size_t i = 0; i < n; ++i) h = h * 2654435761u + static_cast<uint32_t>(tokens[start + i]);
  return h;
}

bool equal_at(std::span<const int32_t> tokens, size_t pos, std::span<const int32_t> key) {
  return std::equal(key.begin(), key.end(), tokens.begin() + static_cast<std::ptrdiff_t>(pos));
}

}  // namespace

NgramMap::NgramMap(int32_t size_n, int32_t size_m, bool key_only, int32_t min_hits)
    : n_(static_cast<size_t>(size_n)),
      m_(static_cast<size_t>(size_m)),
      key_only_(key_only),
      min_hits_(static_cast<uint16_t>(min_hits)),
      hash_(kHashSize, 0) {}

// ref: llama.cpp common_ngram_map_begin.
void NgramMap::begin(std::span<const int32_t> history) {
  const size_t len = history.size();
  size_t cleanup_from = begin_len_;
  if (cleanup_from > len) cleanup_from = len > n_ + m_ ? len - n_ - m_ : 0;
  if (len < checked_len_) {
    // Positions at or past cleanup_from may now hold other text: forget what points there.
    for (uint32_t& pos : hash_) {
      if (pos != 0 && pos >= cleanup_from) pos = 0;
    }
    hash_end_ = cleanup_from > 0 ? static_cast<uint32_t>(cleanup_from - 1) : 0;
    for (size_t i = keys_.size(); i-- > 0;) {
      Key& key = keys_[i];
      if (key.pos >= cleanup_from) {
        keys_.erase(keys_.begin() + static_cast<std::ptrdiff_t>(i));
        continue;
      }
      if (key_only_) continue;
      for (int j = kValues - 1; j >= 0; --j) {
        if (key.values[j].pos == 0 || key.values[j].pos < cleanup_from) continue;
        for (int k = j; k < kValues - 1; ++k) key.values[k] = key.values[k + 1];
        key.values[kValues - 1].pos = 0;  // llama.cpp keeps the slot's n_accepted
        key.values[kValues - 1].count = 0;
      }
      if (key.values[0].pos == 0) keys_.erase(keys_.begin() + static_cast<std::ptrdiff_t>(i));
    }
  }
  checked_len_ = len;
  begin_len_ = len;
}

// The newest position of `key` llama.cpp finds: through the hash, else by scanning the text
// before the last begin() and then the text after it, each backwards, above hash_end_.
size_t NgramMap::find_match(std::span<const int32_t> history, std::span<const int32_t> key) const {
  const size_t len = history.size();
  const size_t last = len - n_ - m_ - 1;  // the newest position whose m-gram lies in the history
  const uint32_t hashed = hash_[ngram_hash(key, 0, n_) % kHashSize];
  if (hashed != 0 && hashed < last && equal_at(history, hashed, key)) return hashed;
  if (begin_len_ > n_ + m_ + 1) {
    for (size_t j = begin_len_ - n_ - m_ - 1; j > hash_end_; --j) {
      if (equal_at(history, j, key)) return j;
    }
  }
  for (size_t j = last; j > begin_len_ && j > hash_end_; --j) {
    if (equal_at(history, j, key)) return j;
  }
  return 0;
}

// Hashes the n-grams at positions not indexed yet, in find_match's scan order; a hash slot keeps
// the first position stored in it.
void NgramMap::index_new_ngrams(std::span<const int32_t> history) {
  const size_t last = history.size() - n_ - m_ - 1;
  auto index = [&](size_t j) {
    uint32_t& slot = hash_[ngram_hash(history, j, n_) % kHashSize];
    if (slot == 0) slot = static_cast<uint32_t>(j);
  };
  if (begin_len_ > n_ + m_ + 1) {
    for (size_t j = begin_len_ - n_ - m_ - 1; j > hash_end_; --j) index(j);
  }
  for (size_t j = last; j > begin_len_ && j > hash_end_; --j) index(j);
  hash_end_ = std::max(static_cast<uint32_t>(last), hash_end_);
}

// Counts the m-grams after each occurrence of `key` in [k.stats_end, match] (k4v statistics).
void NgramMap::count_values(std::span<const int32_t> history, std::span<const int32_t> key, Key& k,
                            size_t match) const {
  for (size_t i = k.stats_end; i <= match; ++i) {
    if (!equal_at(history, i, key)) continue;
    const size_t value_pos = i + n_;
    const std::span<const int32_t> value = history.subspan(value_pos, m_);
    for (Value& v : k.values) {
      if (v.pos == 0) {
        v = {value_pos, 0, static_cast<int16_t>(m_)};
      } else if (!equal_at(history, v.pos, value)) {
        continue;
      }
      v.count = static_cast<uint16_t>(std::min<int>(v.count + 1, kMaxCount));
      break;
    }
  }
  k.stats_end = match;
}

// ref: llama.cpp common_ngram_map_draft.
void NgramMap::draft(std::span<const int32_t> history, int32_t sampled, std::vector<int32_t>& draft) {
  drafted_ = false;
  drafted_key_ = drafted_value_ = 0;
  const size_t len = history.size();
  if (len < 2 * n_ + m_ || len >= UINT32_MAX) return;
  // A history shorter than what the map saw (llama.cpp aborts there): start over from it.
  if (begin_len_ > len || checked_len_ > len) begin(history);
  checked_len_ = len;

  std::vector<int32_t> key(history.end() - static_cast<std::ptrdiff_t>(n_ - 1), history.end());
  key.push_back(sampled);
  const size_t match = find_match(history, key);
  index_new_ngrams(history);
  if (match == 0) return;

  auto it =
      std::find_if(keys_.begin(), keys_.end(), [&](const Key& k) { return equal_at(history, k.pos, key); });
  if (it == keys_.end()) {
    Key k;
    k.pos = match;
    for (Value& v : k.values) v.n_accepted = static_cast<int16_t>(m_);
    keys_.push_back(k);
    it = keys_.end() - 1;
  }
  Key& k = *it;
  k.count = static_cast<uint16_t>(std::min<int>(k.count + 1, kMaxCount));

  size_t slot = 0;
  if (!key_only_) {
    if (k.count < min_hits_) return;
    count_values(history, key, k, match);
    uint16_t best = 0;
    for (size_t v = 0; v < kValues; ++v) {
      if (k.values[v].count > best) {
        best = k.values[v].count;
        slot = v;
      }
    }
    uint32_t others = 0;
    for (size_t v = 0; v < kValues; ++v) {
      if (v != slot) others += k.values[v].count;
    }
    if (others > 0 && best < 2 * others) return;  // no continuation dominates
  }
  const auto n_draft =
      static_cast<size_t>(std::max<int>(0, std::min<int>(static_cast<int>(m_), k.values[slot].n_accepted)));
  for (size_t i = 0; i < n_draft; ++i) draft.push_back(history[match + n_ + i]);
  drafted_ = true;
  drafted_key_ = static_cast<size_t>(it - keys_.begin());
  drafted_value_ = slot;
}

void NgramMap::accept(int32_t n_accepted) {
  if (!drafted_) return;
  keys_[drafted_key_].values[drafted_value_].n_accepted = static_cast<int16_t>(n_accepted);
}

}  // namespace kiln
