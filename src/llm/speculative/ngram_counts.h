// N-gram statistics of lookup decoding (llama.cpp's common_ngram_cache): for every n-gram of 1..4
// tokens, how many times each token followed it. Kept for the context of a generation (built as it
// goes), and in llama.cpp's lookup-cache files: a static one counted over a corpus (-lcs, made by
// `kiln lookup-create` or llama-lookup-create) and a dynamic one of earlier generations (-lcd).
//
// File format (llama.cpp's common_ngram_cache_save, little-endian int32 throughout), one record per
// n-gram: its 4 tokens (unused tail -1), the number K > 0 of tokens that followed it, then K pairs
// (token, count > 0). Records follow the map's iteration order; with the same hash and container
// as llama.cpp, a file kiln writes has llama.cpp's bytes.
//
// The containers are llama.cpp's (std::unordered_map, its hash of n-grams, tokens inserted in the
// same order), because ties between equally counted tokens go to the first in iteration order.
// Not thread-safe to modify; const access may be shared.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <unordered_map>

#include "core/result.h"

namespace kiln {

class NgramCounts {
 public:
  static constexpr int kMaxNgram = 4;
  static constexpr int32_t kNoToken = -1;

  struct Ngram {
    std::array<int32_t, kMaxNgram> tokens;  // the n-gram's tokens, then kNoToken
    bool operator==(const Ngram&) const = default;
  };
  struct NgramHash {  // llama.cpp's: Fibonacci hashing of each token, xor-ed
    size_t operator()(const Ngram& g) const;
  };
  // Token -> times it followed the n-gram.
  using Following = std::unordered_map<int32_t, int32_t>;

  // Counts, for every n-gram of n_min..n_max tokens inside `tokens` that is followed by one of
  // the last `n_new` tokens, that token (llama.cpp's common_ngram_cache_update: lengths in turn,
  // positions in order). 1 <= n_min <= n_max <= kMaxNgram.
  void add(std::span<const int32_t> tokens, int n_min, int n_max, size_t n_new);
  // Adds every count of `other` (llama.cpp's common_ngram_cache_merge).
  void merge(const NgramCounts& other);
  // The tokens seen after `g`, or null.
  const Following* find(const Ngram& g) const;
  size_t size() const { return map_.size(); }
  void clear() { map_.clear(); }

  // Reads a lookup-cache file. Errors name the file and what is wrong: unreadable, truncated, a
  // record that is not an n-gram, a count <= 0, or a token outside [0, n_vocab) (a file made for
  // another vocabulary would draft tokens the model does not have).
  static Result<NgramCounts> load(const std::string& path, int32_t n_vocab);
  // Writes the counts in the file format above, replacing `path` atomically (a temporary file in
  // its folder, then rename).
  Status save(const std::string& path) const;

 private:
  std::unordered_map<Ngram, Following, NgramHash> map_;
};

}  // namespace kiln
