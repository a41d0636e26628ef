// GrammarConstraint: a GBNF grammar applied to token sampling, with llama.cpp's rules (ref:
// src/llama-grammar.cpp llama_grammar_apply_impl / llama_grammar_accept_impl):
//  - a token is allowed when its piece (control tokens rendered) continues the text within the
//    grammar; a piece may end inside a UTF-8 sequence if some completion could match, and token
//    elements (<[id]>) match by id;
//  - end-of-generation tokens are allowed only where the grammar may end; empty pieces and
//    invalid UTF-8 never;
//  - a lazy grammar allows everything until a trigger (a word, a regex pattern, or a token)
//    appears in the output; the grammar then applies from the trigger on (the text from the
//    trigger, or from the pattern's first non-empty capture group, is replayed into it).
//
//   auto c = GrammarConstraint::create({.gbnf = text}, vocab, &tokenizer);
//   if (!c->allows(id)) { ... c->allowed() ... }   // check one token, or the whole vocabulary
//   c->accept(id);                                   // after the token is chosen
//
// Speed: the whole-vocabulary answer walks GrammarVocab's trie (shared prefixes once, subtrees
// pruned at the first impossible character) and is cached per parse state, so the inside of a
// long string costs one walk.
// Work: one token's checks and acceptance share the matcher's WorkBudget (work_budget.h). A
// grammar whose start already costs more is refused by create(); one that runs out later makes
// the constraint failed(): allows() then answers false, allowed() a partial answer, accept() the
// error, and the owner ends the generation with failure() (a fault of the request's grammar, or
// an interruption).
// Thread-safety: none; one constraint per sequence (set_interrupt's flag may be raised from any
// thread).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/result.h"
#include "text/grammar/gbnf.h"
#include "text/grammar/grammar_matcher.h"
#include "text/grammar/grammar_vocab.h"

namespace kiln::grammar {

// What starts a lazy grammar (ref: llama.cpp common_grammar_trigger).
struct Trigger {
  enum class Type : uint8_t {
    Word,         // the text appears anywhere in the output; the grammar applies from it on
    Pattern,      // an ECMAScript regex found anywhere (from its first non-empty group on)
    PatternFull,  // a regex that must match the whole output so far (anchored ^...$)
    Token,        // a token id
  };
  Type type = Type::Word;
  std::string value;   // the word or pattern
  int32_t token = -1;  // Type::Token
};

struct GrammarSpec {
  std::string gbnf;
  bool lazy = false;              // wait for a trigger before constraining
  std::vector<Trigger> triggers;  // for lazy grammars
  uint64_t work_limit = WorkBudget::kDefaultLimit;  // units one token's grammar work may take
};

class GrammarConstraint {
 public:
  // Parses the grammar (token references resolved with `tokenizer`, which may be null) and
  // compiles the triggers. Errors: grammar syntax, a bad pattern, a lazy grammar without
  // triggers, a trigger token outside the vocabulary, a start that costs more than one token's
  // work budget.
  ~GrammarConstraint();
  static Result<std::unique_ptr<GrammarConstraint>> create(const GrammarSpec& spec,
                                                           std::shared_ptr<const GrammarVocab> vocab,
                                                           const text::Tokenizer* tokenizer = nullptr);

  // Back to the state after create() (a new reply to constrain).
  void reset();

  // True while a lazy grammar waits for its trigger: every token is allowed.
  bool awaiting_trigger() const { return awaiting_trigger_; }
  // True when the output so far is a complete sentence of the grammar.
  bool complete() const { return matcher_.complete(); }

  // Whether `token` may come next (llama.cpp's check of one sampled token).
  bool allows(int32_t token);
  // Every token's answer at once: one byte per vocabulary entry, 1 = allowed. The reference is
  // valid until the next accept() or reset(). Awaiting a trigger, everything is allowed.
  const std::vector<uint8_t>& allowed();

  // Advances over a generated token. While awaiting a trigger this only watches for it. Errors
  // when the grammar cannot take the token (the constraint is then unchanged).
  Status accept(int32_t token);
  // Advances over tokens that the prompt already holds after the template's generation prompt
  // (llama.cpp's prefill of output-format and tool-call grammars). Not for user grammars.
  Status prefill(std::span<const int32_t> tokens);

  const GrammarVocab& vocab() const { return *vocab_; }

  // The work budget ran out (or was interrupted): the constraint is unusable until reset().
  bool failed() const { return matcher_.budget().exhausted(); }
  bool interrupted() const { return matcher_.budget().interrupted(); }
  // This token's work so far, in WorkBudget units (from the last accept()).
  uint64_t work_used() const { return matcher_.budget().used(); }
  // Why it failed (valid when failed()).
  std::string failure() const { return matcher_.budget().message(); }
  // Raised from any thread, `flag` stops the work in progress (failed(), interrupted()): a
  // cancelled request's token ends within microseconds. Non-owning: must outlive the constraint's
  // uses; kept across reset().
  void set_interrupt(const std::atomic<bool>* flag);

 private:
  struct Patterns;  // the compiled regexes of the pattern triggers (grammar_constraint.cpp)
  struct CachedMask {
    std::vector<StackId> stacks;
    uint64_t generation = 0;
    uint64_t last_use = 0;
    std::vector<uint8_t> mask;
  };

  GrammarConstraint(std::shared_ptr<const Grammar> grammar, std::shared_ptr<const GrammarVocab> vocab, GrammarSpec spec,
                    std::shared_ptr<const Patterns> patterns);

  // Whether the code points (then the trailing partial sequence) of token `id` continue the
  // grammar from the current stacks.
  bool walk(int32_t id, const uint32_t* cps, size_t n, PartialUtf8 end);
  // Whether a token ending with `end` after the text is allowed by one of `live`.
  bool accepts_end(const std::vector<StackId>& live, PartialUtf8 end) const;
  // The trie walk behind allowed(): marks the Text tokens of node's subtree.
  void mark(uint32_t node, size_t depth, std::vector<uint8_t>& out);
  void compute_slow(std::vector<uint8_t>& out);  // after a piece that ended inside a UTF-8 sequence
  // Where trigger i of spec_.triggers starts in the buffered output, or npos.
  size_t find_trigger(size_t i, size_t previous_size) const;
  Status replay_from(size_t start);

  std::shared_ptr<const Grammar> grammar_;
  std::shared_ptr<const GrammarVocab> vocab_;
  GrammarSpec spec_;  // triggers normalised (full patterns anchored)
  std::shared_ptr<const Patterns> patterns_;
  GrammarMatcher matcher_;

  bool awaiting_trigger_ = false;
  std::string trigger_buffer_;
  struct BufferedToken {
    int32_t token;
    size_t begin, end;  // its piece in trigger_buffer_
  };
  std::vector<BufferedToken> buffered_;

  std::vector<std::vector<StackId>> levels_;  // live stacks per trie depth (scratch)
  std::vector<CachedMask> cache_;
  uint64_t uses_ = 0;
  std::vector<uint8_t> all_allowed_;
  const std::vector<uint8_t>* current_ = nullptr;  // allowed() for the current state, if computed
  const std::atomic<bool>* interrupt_ = nullptr;   // set_interrupt()
};

}  // namespace kiln::grammar
