// ReasoningBudget: caps the tokens a model spends inside a reasoning block (<think> ... </think>)
// as llama.cpp's reasoning-budget sampler does (ref: common/reasoning-budget.cpp, llama-server's
// --reasoning-budget): it watches the tokens accepted for the start tag's token sequence, counts
// the tokens after it, and once `budget` of them were written (and the last one ended a UTF-8
// character) forces `forced` (an optional message, then the first end tag) one token at a time.
// An end tag the model writes itself ends the block; a later start tag opens a new one with a
// fresh budget.
//   Idle --start--> Counting --budget spent--> [WaitingUtf8 -->] Forcing --forced written--> Done
// Budget 0 forces at once when the block opens. The prompt's own generation prompt is fed
// through accept() first (a template that opens "<think>" starts the count there).
// force_end() ends an open block on demand (llama-server's reasoning_control): as if the budget
// were spent at the last token.
// Thread-safety: none; one per sampler.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kiln {

namespace text {
class Tokenizer;
}

struct ReasoningBudgetSpec {
  std::vector<int32_t> start;              // the start tag's tokens (non-empty)
  std::vector<std::vector<int32_t>> ends;  // the end tags' tokens (non-empty; ends[0] is forced)
  std::vector<int32_t> forced;             // what the budget forces: message tokens + ends[0]
  int32_t budget = 0;                      // tokens allowed in a block (>= 0)
  std::vector<int32_t> prefill;            // the generation prompt's tokens, accepted first
};

class ReasoningBudget {
 public:
  enum class State : uint8_t { Idle, Counting, WaitingUtf8, Forcing, Done };

  // `ends_utf8(token)`: whether the token's text ends on a whole UTF-8 character (the budget
  // never cuts a character in two).
  ReasoningBudget(ReasoningBudgetSpec spec, std::function<bool(int32_t)> ends_utf8);

  // The token the next position must take (Forcing), else nullopt.
  std::optional<int32_t> forced_token() const;
  // A generated token (forced ones included).
  void accept(int32_t token);
  // Back to the state after the prefill (a new reply).
  void reset();
  // Ends the block being counted: the next positions take `forced` (after the current UTF-8
  // character is whole). False, and nothing changes, when no block is being counted (none open
  // yet, or its end already forced or written).
  bool force_end();
  State state() const { return state_; }

 private:
  // Feeds `token` to a matcher's window; true when one of `seqs` ends there (the window is then
  // cleared, as llama.cpp's matcher restarts after a match).
  static bool match(std::vector<int32_t>& window, const std::vector<std::vector<int32_t>>& seqs, int32_t token);
  void open_block();
  // Counting is over: Forcing, or WaitingUtf8 while the last token left a character unfinished.
  void end_block();

  ReasoningBudgetSpec spec_;
  std::vector<std::vector<int32_t>> starts_;  // {spec_.start}
  std::function<bool(int32_t)> ends_utf8_;
  State state_ = State::Idle;
  int32_t remaining_ = 0;
  size_t force_pos_ = 0;
  bool last_whole_ = true;  // the last accepted token ended a UTF-8 character
  std::vector<int32_t> start_window_, end_window_;
};

// The spec of a template's reasoning tags `start` and `end` (their text, special tokens parsed):
// `message` then the end tag forced after `budget` tokens (< 0: never, the block can still be
// ended by force_end()), `prefill` the generation prompt's text. Nullopt when a tag is empty or
// tokenizes to nothing (ref: llama.cpp common_sampler_init's reasoning_budget_* parameters).
std::optional<ReasoningBudgetSpec> reasoning_budget_spec(const text::Tokenizer& tok, const std::string& start,
                                                         const std::string& end, const std::string& message,
                                                         int64_t budget, const std::string& prefill);

// ReasoningBudget's ends_utf8 for a tokenizer's tokens (a token without a piece counts as whole).
std::function<bool(int32_t)> token_ends_utf8(const text::Tokenizer& tok);

// Whether a token's text ends on a whole UTF-8 character, llama.cpp's rule (common_utf8_is_complete):
// looking back at most 4 bytes for a lead byte; a text of continuation bytes only is unfinished.
bool ends_utf8_character(std::string_view piece);

}  // namespace kiln
