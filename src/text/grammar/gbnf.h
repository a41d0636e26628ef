// GBNF grammars with llama.cpp's syntax and semantics (ref: llama.cpp src/llama-grammar.cpp,
// grammars/README.md): rules `name ::= alternatives`, string literals, character classes
// ([a-z], [^"\\]), `.`, token references (<[42]>, <|im_end|>, !<[42]>), groups, and the
// repetition operators * + ? {m} {m,} {m,n} (expanded into generated rules as llama.cpp does).
//
//   KILN_ASSIGN_OR_RETURN(auto g, grammar::Grammar::parse(text, {.tokenizer = &tok}));
//
// A Grammar is immutable after parsing; share it (shared_ptr<const Grammar>) between any number
// of matchers and threads. Errors name the line and column:
//   "grammar: line 2, column 9: expecting name"
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"

namespace kiln::text {
class Tokenizer;
}

namespace kiln::grammar {

// One element of a rule (ref: llama_gretype). A rule is a sequence of alternatives, each a
// sequence of elements ending in Alt (another alternative follows) or End (the rule ends).
enum class ElementType : uint8_t {
  End,        // end of the rule
  Alt,        // end of one alternative; another follows
  RuleRef,    // value: rule id
  Char,       // value: code point; may be followed by CharRangeUpper / CharAlt elements
  CharNot,    // an inverted class [^...]: value as Char
  CharRangeUpper,  // makes the preceding Char/CharAlt the range [prev, value]
  CharAlt,    // one more code point (or range start) of the same class
  CharAny,    // `.`: any code point
  Token,      // value: token id (<[id]> or <piece>)
  TokenNot,   // value: token id (!<[id]>): any token but this one
};

struct Element {
  ElementType type;
  uint32_t value;
  bool operator==(const Element&) const = default;
};

// The starting element of a character class (Char, CharNot or CharAny).
inline bool is_char_class_start(ElementType t) {
  return t == ElementType::Char || t == ElementType::CharNot || t == ElementType::CharAny;
}
inline bool is_token_element(ElementType t) { return t == ElementType::Token || t == ElementType::TokenNot; }
inline bool is_end_of_sequence(ElementType t) { return t == ElementType::End || t == ElementType::Alt; }

struct ParseOptions {
  std::string_view root = "root";  // the start rule
  // Resolves token references written as text (<|im_end|>); <[id]> needs no tokenizer. Non-owning.
  const text::Tokenizer* tokenizer = nullptr;
};

class Grammar {
 public:
  // Parses GBNF text. Errors: syntax (with line and column), undefined rules, a missing root
  // rule, left recursion, repetitions over llama.cpp's limits.
  static Result<Grammar> parse(std::string_view text, const ParseOptions& options = {});

  // All rules' elements, concatenated: rule r occupies [rule_start(r), the End element].
  const std::vector<Element>& elements() const { return elements_; }
  uint32_t rule_start(uint32_t rule) const { return rule_starts_[rule]; }
  uint32_t n_rules() const { return static_cast<uint32_t>(rule_starts_.size()); }
  uint32_t root() const { return root_; }
  const std::string& rule_name(uint32_t rule) const { return rule_names_[rule]; }

  // The grammar in GBNF, one rule per line, as llama.cpp's parser prints it (generated rules
  // included): for diagnostics and tests.
  std::string to_string() const;

 private:
  std::vector<Element> elements_;
  std::vector<uint32_t> rule_starts_;
  std::vector<std::string> rule_names_;
  uint32_t root_ = 0;
};

}  // namespace kiln::grammar
