// GrammarMatcher: the set of parse positions of a Grammar after some text, as llama.cpp keeps it
// (ref: src/llama-grammar.cpp: llama_grammar_advance_stack, llama_grammar_accept_chr,
// llama_grammar_accept_token). Each position is a pushdown stack of rule elements whose top is a
// terminal (a character class or a token) or which is empty (the text so far is a sentence).
//
// Stacks are persistent and hash-consed: a stack is a StackId, equal stacks have equal ids, and
// the work of expanding a stack or stepping over a character class is memoised per id, so text
// that revisits a parse state (the inside of a JSON string) costs a lookup.
//
// Work: every call counts its work in the matcher's WorkBudget (work_budget.h); once it runs out
// (or its interrupt flag is raised) the call stops where it is, and the matcher is spent: its
// memo tables may hold partial answers, so accept_token() refuses from then on and the owner
// drops it (GrammarConstraint::failed()). accept_token() starts a new token's budget when it
// succeeds, so the budget covers one token: the checks before it and its acceptance.
//
// Thread-safety: none; one matcher per sequence. The Grammar is shared (immutable).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/result.h"
#include "text/grammar/gbnf.h"
#include "text/grammar/utf8_decode.h"
#include "text/grammar/work_budget.h"

namespace kiln::grammar {

using StackId = uint32_t;
inline constexpr StackId kEmptyStack = 0;

class GrammarMatcher {
 public:
  // Positioned at the start of `grammar`'s root rule; that expansion counts against a budget of
  // `work_limit` units (spent: budget().exhausted(), and the matcher is unusable).
  explicit GrammarMatcher(std::shared_ptr<const Grammar> grammar,
                          uint64_t work_limit = WorkBudget::kDefaultLimit);

  const Grammar& grammar() const { return *grammar_; }

  // The current stacks (deduplicated; never empty while the text is a viable prefix).
  const std::vector<StackId>& stacks() const { return stacks_; }
  PartialUtf8 partial() const { return partial_; }
  // True when the text so far is a complete sentence (some stack is empty).
  bool complete() const;
  // Changes when accept_token() renumbers the stacks (after the arena grew large): StackIds kept
  // from before are meaningless then.
  uint64_t generation() const { return generation_; }

  // Advances over a token: its piece's code points (resuming any partial UTF-8 sequence), or,
  // for stacks whose top is a token element, the token id. Errors when no stack survives (the
  // matcher is then unchanged) and when the budget runs out (budget().message(); the matcher is
  // spent).
  Status accept_token(int32_t token, std::string_view piece);

  // ---- Building blocks for token-level constraints (GrammarConstraint) ----

  // Top element position of a non-empty stack.
  uint32_t top(StackId s) const { return nodes_[s].pos; }
  const Element& top_element(StackId s) const { return grammar_->elements()[nodes_[s].pos]; }
  // Whether code point `cp` is in the character class starting at element `pos`.
  bool match_char(uint32_t pos, uint32_t cp) const;
  // Whether some completion of `partial` could be in the class at `pos` (llama.cpp's
  // llama_grammar_match_partial_char).
  bool match_partial(uint32_t pos, PartialUtf8 partial) const;
  // The stacks after the character class on top of `s` matched one character (expanded). The
  // reference is valid until the next call that may intern stacks (after_char, after_token,
  // accept_token).
  const std::vector<StackId>& after_char(StackId s);
  // The stacks after the token element on top of `s` matched (expanded).
  std::vector<StackId> after_token(StackId s);
  // Appends `s` to `out` unless present, counting the scan against the budget (stacks are few in
  // grammars people write: a linear scan beats hashing). False once the budget is spent.
  bool add(std::vector<StackId>& out, StackId s);
  // This token's work so far (see above); set_interrupt() on it stops the work from any thread.
  WorkBudget& budget() { return budget_; }
  const WorkBudget& budget() const { return budget_; }

 private:
  struct Node {
    uint32_t pos;    // element index in grammar().elements()
    StackId parent;  // the stack below
  };
  // A character class compiled for matching: an ASCII bitmap plus ranges for the rest.
  struct CharClass {
    bool negated = false;
    bool any = false;
    uint64_t ascii[2] = {0, 0};
    std::vector<std::pair<uint32_t, uint32_t>> ranges;  // inclusive, code points >= 128 only
    uint32_t after = 0;                                 // element index after the class
  };

  StackId push(StackId parent, uint32_t pos);
  // Memo of a function of a StackId (valid until the next call that interns stacks).
  struct Memo {
    std::vector<std::vector<StackId>> value;
    std::vector<uint8_t> done;
  };
  const std::vector<StackId>& memoised(Memo& memo, StackId s, std::vector<StackId> (GrammarMatcher::*compute)(StackId));
  // llama_grammar_advance_stack: `s` expanded into stacks whose tops are terminals (or empty).
  const std::vector<StackId>& expand(StackId s);
  std::vector<StackId> compute_expand(StackId s);
  std::vector<StackId> compute_after_char(StackId s);
  // Drops the memo tables and re-interns the current stacks when the arena grew large.
  void compact();

  std::shared_ptr<const Grammar> grammar_;
  std::vector<CharClass> classes_;        // by element index (only class starts are filled)
  std::vector<Node> nodes_;               // nodes_[0]: the empty stack
  std::unordered_map<uint64_t, StackId> interned_;
  Memo expanded_;    // expand()
  Memo after_char_;  // after_char()
  uint64_t generation_ = 0;

  std::vector<StackId> stacks_;
  PartialUtf8 partial_;
  WorkBudget budget_;
  std::vector<StackId> spent_;  // what memoised() answers once the budget ran out (not memoised)
};

}  // namespace kiln::grammar
