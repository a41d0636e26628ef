// A small backtracking regex engine with ECMAScript semantics (leftmost match, first alternative
// that succeeds, greedy quantifiers that give back), over a sequence of uint32 symbols. It runs
// the pre-tokenizer patterns llama.cpp hands to std::regex / std::wregex, on the same symbol
// streams llama.cpp builds (see pretokenizer.cpp), so the splits agree with llama.cpp exactly.
//
// Supported: literals, `.`, classes `[...]`/`[^...]` with ranges, \s \S \d \D \w \W (ASCII, as in
// the C locale), \r \n \t \f \v \xHH \uHHHH and escaped punctuation, \p{N} \p{L} \p{P} \p{M}
// \p{S} \p{Lu} \p{Ll} \p{Lt} \p{Lm} \p{Lo} (as llama.cpp's "collapsed" symbols: see
// CollapsedSymbol), groups `(...)` `(?:...)`, lookaheads `(?=...)` `(?!...)`, `|`, `* + ? {n}
// {n,} {n,m}` with lazy `?` variants, `^`, `$`, `\b`, `\B`.
// Thread-safety: a compiled Regex is immutable; concurrent searches are fine.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"

namespace kiln::text {

// The symbols llama.cpp substitutes for non-ASCII codepoints when a pattern uses \p{..}
// (ref: llama.cpp unicode_regex_split, "collapsed" text). ASCII codepoints stay themselves.
enum CollapsedSymbol : uint32_t {
  kCollapsedOther = 0xD0,
  kCollapsedNumber = 0xD1,
  kCollapsedLetter = 0xD2,
  kCollapsedPunctuation = 0xD3,
  kCollapsedAccentMark = 0xD4,
  kCollapsedSymbol = 0xD5,
  kCollapsedWhitespace = 0x0B,  // vertical tab: what std::regex's \s matches
};

struct RegexMatch {
  size_t begin = 0;
  size_t end = 0;
};

class Regex {
 public:
  // Compiles a UTF-8 pattern. An Error names the pattern and the offending position.
  static Result<Regex> compile(std::string_view pattern);

  // True when the pattern uses \p{..} classes: run it on collapsed symbols.
  bool uses_categories() const { return uses_categories_; }

  // Leftmost match starting at or after `from`; `not_empty_at_from` rejects an empty match at
  // `from` (the rule std::regex_iterator applies after an empty match).
  std::optional<RegexMatch> search(std::span<const uint32_t> text, size_t from,
                                   bool not_empty_at_from = false) const;

  struct Node;

 private:
  std::shared_ptr<const Node> root_;
  bool uses_categories_ = false;
};

}  // namespace kiln::text
