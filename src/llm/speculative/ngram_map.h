// ngram-map-k and ngram-map-k4v drafting: n-grams of the token history found through a hash map
// kept across steps, with per-n-gram statistics of the m-grams that followed them (llama.cpp's
// common_ngram_map, ref: common/ngram-map.cpp of the reference release, whose rules, search
// order and statistics this follows so that drafts equal llama.cpp's).
//
// key-only (ngram-map-k): the m tokens after the matched n-gram, shortened to what the target
//   accepted the last time this n-gram drafted.
// k4v: up to four distinct m-grams per n-gram are counted; the most frequent drafts when the
//   n-gram was seen min_hits times and it occurred at least twice as often as the others together.
// State per sequence; not thread-safe.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace kiln {

class NgramMap {
 public:
  NgramMap(int32_t size_n, int32_t size_m, bool key_only, int32_t min_hits);

  // A new generation starts with `history` (the prompt): forgets n-grams of text past its end
  // that the history no longer holds (a shortened context).
  void begin(std::span<const int32_t> history);
  // Appends the draft after `history` + `sampled` to `draft` (nothing when there is none).
  void draft(std::span<const int32_t> history, int32_t sampled, std::vector<int32_t>& draft);
  // The target accepted n_accepted tokens of the last draft this map made.
  void accept(int32_t n_accepted);

 private:
  static constexpr int kValues = 4;             // m-grams counted per n-gram
  static constexpr uint16_t kMaxCount = 16380;  // counts saturate here
  static constexpr size_t kHashSize = 262144;   // entries of the hash -> position map

  struct Value {
    size_t pos = 0;           // where the m-gram starts in the history; 0: unused slot
    uint16_t count = 0;       // times it followed the n-gram
    int16_t n_accepted = -1;  // tokens the target accepted when it last drafted
  };
  struct Key {
    size_t pos = 0;        // an occurrence of the n-gram in the history
    size_t stats_end = 0;  // the history was scanned for its m-grams up to here
    uint16_t count = 0;    // times it was looked up
    std::array<Value, kValues> values;
  };

  size_t find_match(std::span<const int32_t> history, std::span<const int32_t> key) const;
  void index_new_ngrams(std::span<const int32_t> history);
  void count_values(std::span<const int32_t> history, std::span<const int32_t> key, Key& k,
                    size_t match) const;

  size_t n_, m_;
  bool key_only_;
  uint16_t min_hits_;
  std::vector<Key> keys_;
  std::vector<uint32_t> hash_;  // hash of an n-gram -> a position where it occurs (0: none)
  uint32_t hash_end_ = 0;       // positions above this are not indexed yet
  size_t begin_len_ = 0;        // history length at the last begin()
  size_t checked_len_ = 0;      // history length at the last draft() or begin()
  bool drafted_ = false;        // the last draft() made a draft
  size_t drafted_key_ = 0, drafted_value_ = 0;
};

}  // namespace kiln
