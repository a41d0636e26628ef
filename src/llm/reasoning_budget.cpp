#include "llm/reasoning_budget.h"

#include <algorithm>
#include <climits>

#include "text/tokenizer.h"

namespace kiln {

ReasoningBudget::ReasoningBudget(ReasoningBudgetSpec spec, std::function<bool(int32_t)> ends_utf8)
    : spec_(std::move(spec)), starts_{spec_.start}, ends_utf8_(std::move(ends_utf8)) {
  reset();
}

bool ReasoningBudget::match(std::vector<int32_t>& window, const std::vector<std::vector<int32_t>>& seqs,
                            int32_t token) {
  window.push_back(token);
  size_t longest = 0;
  for (const auto& s : seqs) longest = std::max(longest, s.size());
  if (window.size() > longest) window.erase(window.begin(), window.end() - static_cast<std::ptrdiff_t>(longest));
  for (const auto& s : seqs) {
    if (!s.empty() && window.size() >= s.size() && std::equal(s.begin(), s.end(), window.end() - static_cast<std::ptrdiff_t>(s.size()))) {
      window.clear();
      return true;
    }
  }
  return false;
}

void ReasoningBudget::open_block() {
  remaining_ = spec_.budget;
  end_window_.clear();
  force_pos_ = 0;
  last_whole_ = true;  // the start tag's last token
  state_ = remaining_ <= 0 ? State::Forcing : State::Counting;
}

std::optional<int32_t> ReasoningBudget::forced_token() const {
  if (state_ != State::Forcing || force_pos_ >= spec_.forced.size()) return std::nullopt;
  return spec_.forced[force_pos_];
}

void ReasoningBudget::accept(int32_t token) {
  switch (state_) {
    case State::Idle:
    case State::Done:  // a new block after the last one gets a fresh budget
      if (match(start_window_, starts_, token)) open_block();
      break;
    case State::Counting:
    case State::WaitingUtf8: {
      if (match(end_window_, spec_.ends, token)) {
        state_ = State::Done;
        break;
      }
      last_whole_ = !ends_utf8_ || ends_utf8_(token);
      if (state_ == State::Counting && --remaining_ > 0) break;
      end_block();
      break;
    }
    case State::Forcing:
      match(end_window_, spec_.ends, token);
      if (++force_pos_ >= spec_.forced.size()) state_ = State::Done;
      break;
  }
}

void ReasoningBudget::end_block() {
  state_ = last_whole_ ? State::Forcing : State::WaitingUtf8;
  force_pos_ = 0;
  end_window_.clear();
}

bool ReasoningBudget::force_end() {
  if (state_ != State::Counting) return false;
  end_block();
  return true;
}

void ReasoningBudget::reset() {
  state_ = State::Idle;
  remaining_ = spec_.budget;
  force_pos_ = 0;
  last_whole_ = true;
  start_window_.clear();
  end_window_.clear();
  for (int32_t t : spec_.prefill) accept(t);
}

std::optional<ReasoningBudgetSpec> reasoning_budget_spec(const text::Tokenizer& tok, const std::string& start,
                                                         const std::string& end, const std::string& message,
                                                         int64_t budget, const std::string& prefill) {
  ReasoningBudgetSpec spec;
  spec.start = tok.tokenize(start, false, true);
  spec.ends = {tok.tokenize(end, false, true)};
  if (spec.start.empty() || spec.ends[0].empty()) return std::nullopt;
  spec.forced = tok.tokenize(message, false, true);
  spec.forced.insert(spec.forced.end(), spec.ends[0].begin(), spec.ends[0].end());
  spec.budget = budget < 0 || budget > INT32_MAX ? INT32_MAX : static_cast<int32_t>(budget);
  spec.prefill = tok.tokenize(prefill, false, true);
  return spec;
}

std::function<bool(int32_t)> token_ends_utf8(const text::Tokenizer& tok) {
  return [&tok](int32_t id) {
    const auto piece = tok.token_to_piece(id, false);
    return !piece.ok() || ends_utf8_character(*piece);
  };
}

bool ends_utf8_character(std::string_view piece) {
  if (piece.empty()) return true;
  for (size_t back = 1; back <= std::min<size_t>(4, piece.size()); ++back) {
    const auto c = static_cast<unsigned char>(piece[piece.size() - back]);
    if ((c & 0xC0) == 0x80) continue;
    const size_t need = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
    return back >= need;
  }
  return false;
}

}  // namespace kiln
