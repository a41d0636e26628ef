// ngram-mod drafting: a fixed-size hash table from n-grams to the token that followed them,
// chained token by token (llama.cpp's common_ngram_mod and its speculative source, ref:
// common/ngram-mod.cpp and common/speculative.cpp of the reference release).
//
// NgramModTable is shared by the sequences of one model, as in llama.cpp (4M entries, 16 MiB);
// NgramModDrafter is one sequence's position in it. Not thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "llm/speculative/options.h"

namespace kiln {

class NgramModTable {
 public:
  static constexpr int32_t kEmpty = -1;
  explicit NgramModTable(int32_t n, size_t size = size_t{4} << 20);

  size_t n() const { return n_; }
  // Records that tokens[n] followed tokens[0, n).
  void add(const int32_t* tokens);
  // The token recorded after tokens[0, n), or kEmpty.
  int32_t get(const int32_t* tokens) const;
  void reset();
  // Fraction of entries in use.
  double occupancy() const { return static_cast<double>(used_) / static_cast<double>(entries_.size()); }

 private:
  size_t index(const int32_t* tokens) const;
  size_t n_, used_ = 0;
  std::vector<int32_t> entries_;
};

class NgramModDrafter {
 public:
  NgramModDrafter(NgramModTable& table, const NgramModOptions& options) : table_(&table), options_(options) {}

  // Adds the prompt's n-grams (the table is emptied when it is more than a quarter full).
  void begin(std::span<const int32_t> history);
  // The draft after `history` + `sampled`: up to n_max tokens, none when fewer than n_min.
  std::vector<int32_t> draft(std::span<const int32_t> history, int32_t sampled);
  // Five drafts in a row with less than a quarter accepted empty the table.
  void accept(int32_t n_accepted);

 private:
  NgramModTable* table_;  // non-owning; shared with the model's other sequences
  NgramModOptions options_;
  size_t indexed_ = 0;     // history positions below this are in the table
  size_t last_draft_ = 0;  // length of the last draft
  int low_streak_ = 0;     // consecutive drafts with under 25% accepted
};

}  // namespace kiln
