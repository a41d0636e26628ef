// Speculative decoding options: which draft sources run and their settings, with llama.cpp's
// names and defaults (common_params_speculative of the reference release, node-llama-cpp 3.22.1).
//
// Sources, in llama.cpp's order of preference (the first that proposes a draft wins each step):
//   ngram-simple   the m tokens that followed the last occurrence of the newest n-gram (stateless)
//   ngram-map-k    the same through a hash map of n-grams kept across steps
//   ngram-map-k4v  up to four continuations per n-gram; the most frequent one, when it dominates
//   ngram-mod      a fixed-size hash of n-gram -> next token, chained token by token
//   ngram-cache    n-gram (1..4) statistics of the context, llama.cpp's lookup decoding
//   draft-simple   a small draft model of the same vocabulary, greedy
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"

namespace kiln {

enum class DraftSource : uint8_t { NgramSimple, NgramMapK, NgramMapK4v, NgramMod, NgramCache, DraftSimple };

// llama.cpp's --spec-type name of a source ("ngram-simple", ...).
std::string_view draft_source_name(DraftSource source);

// Parses llama.cpp's comma list of --spec-type names ("none", "ngram-simple,draft-simple", ...).
// Returns the sources in order of preference without repeats; "none" anywhere gives an empty list.
// Error on an unknown name (the message lists the known ones).
Result<std::vector<DraftSource>> parse_draft_sources(std::string_view list);

// Draft-model settings (--spec-draft-n-max, -n-min, -p-min).
struct DraftModelLimits {
  int32_t n_max = 3;   // most tokens drafted per step
  int32_t n_min = 0;   // a draft shorter than this is dropped
  float p_min = 0.0f;  // drafting stops at a token whose probability (among the top 10) is lower
};

// ngram-simple / ngram-map-k / ngram-map-k4v (--spec-ngram-<source>-size-n, -size-m, -min-hits).
struct NgramMapOptions {
  int32_t size_n = 12;   // length of the n-gram looked up
  int32_t size_m = 48;   // length of the m-gram drafted after it
  int32_t min_hits = 1;  // ngram-map-k4v: occurrences of the n-gram before it drafts
};

// ngram-mod (--spec-ngram-mod-n-match, -n-max, -n-min).
struct NgramModOptions {
  int32_t n_match = 24;  // length of the n-gram hashed
  int32_t n_max = 64;
  int32_t n_min = 48;
};

struct SpeculativeOptions {
  std::vector<DraftSource> sources;  // in order of preference; empty: no speculation
  DraftModelLimits draft;
  NgramMapOptions ngram_simple, ngram_map_k, ngram_map_k4v;
  NgramModOptions ngram_mod;
  // ngram-cache's lookup-cache files (-lcs, -lcd; llama.cpp's file format: ngram_counts.h). The
  // static one is counted over a corpus and only read; the dynamic one holds earlier generations'
  // counts: read at start (a missing file is an empty cache), and `kiln run`/`kiln chat` add their
  // generations' counts and write it back at the end (as llama-lookup).
  std::string lookup_cache_static, lookup_cache_dynamic;

  bool enabled() const { return !sources.empty(); }
  bool uses(DraftSource s) const;
  // The longest draft any configured source can propose (llama.cpp's common_speculative_n_max).
  int32_t n_max() const;
  // Errors on values out of range, naming the flag (llama.cpp's bounds, and n_min <= n_max,
  // p_min in [0, 1]), and on a lookup cache without ngram-cache among the sources.
  Status validate() const;
};

}  // namespace kiln
