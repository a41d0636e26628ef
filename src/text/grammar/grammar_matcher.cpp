#include "text/grammar/grammar_matcher.h"

#include <algorithm>
#include <string>
#include <unordered_set>

namespace kiln::grammar {
namespace {

// Past this many interned stacks, the memo tables are dropped and the live stacks re-interned.
constexpr size_t kCompactNodes = size_t{1} << 20;
// Work units of interning a stack or visiting one while expanding (a hash lookup or insert), in
// WorkBudget's units (comparing two parse positions is one).
constexpr uint64_t kHashUnits = 8;

}  // namespace

GrammarMatcher::GrammarMatcher(std::shared_ptr<const Grammar> grammar, uint64_t work_limit)
    : grammar_(std::move(grammar)), budget_(work_limit) {
  const auto& el = grammar_->elements();
  classes_.resize(el.size());
  for (uint32_t i = 0; i < el.size(); ++i) {
    if (!is_char_class_start(el[i].type)) continue;
    CharClass& cc = classes_[i];
    cc.negated = el[i].type == ElementType::CharNot;
    uint32_t p = i;
    // ref: llama_grammar_match_char's walk over the class's elements
    do {
      if (el[p].type == ElementType::CharAny) {
        cc.any = true;
        p += 1;
        continue;
      }
      uint32_t lo = el[p].value, hi = el[p].value;
      if (el[p + 1].type == ElementType::CharRangeUpper) {
        hi = el[p + 1].value;
        p += 2;
      } else {
        p += 1;
      }
      for (uint32_t c = lo; c <= std::min<uint32_t>(hi, 127); ++c) cc.ascii[c >> 6] |= uint64_t{1} << (c & 63);
      if (hi >= 128) cc.ranges.emplace_back(std::max<uint32_t>(lo, 128), hi);
    } while (el[p].type == ElementType::CharAlt);
    cc.after = p;
  }
  nodes_.push_back({0, kEmptyStack});
  // ref: llama_grammar_init_impl: one stack per alternative of the root rule, expanded.
  for (uint32_t pos = grammar_->rule_start(grammar_->root());;) {
    const StackId s = is_end_of_sequence(el[pos].type) ? kEmptyStack : push(kEmptyStack, pos);
    for (StackId x : expand(s)) add(stacks_, x);
    while (!is_end_of_sequence(el[pos].type)) ++pos;
    if (el[pos].type != ElementType::Alt) break;
    ++pos;
  }
  if (!budget_.exhausted()) budget_.restart();  // the first token gets a budget of its own
}

bool GrammarMatcher::add(std::vector<StackId>& out, StackId s) {
  if (!budget_.spend(out.size() + 1)) return false;
  for (StackId x : out) {
    if (x == s) return true;
  }
  out.push_back(s);
  return true;
}

StackId GrammarMatcher::push(StackId parent, uint32_t pos) {
  const uint64_t key = (static_cast<uint64_t>(pos) << 32) | parent;
  auto [it, inserted] = interned_.try_emplace(key, static_cast<StackId>(nodes_.size()));
  if (inserted) nodes_.push_back({pos, parent});
  return it->second;
}

bool GrammarMatcher::complete() const {
  return std::find(stacks_.begin(), stacks_.end(), kEmptyStack) != stacks_.end();
}

bool GrammarMatcher::match_char(uint32_t pos, uint32_t cp) const {
  const CharClass& cc = classes_[pos];
  bool found = cc.any;
  if (!found) {
    if (cp < 128) {
      found = (cc.ascii[cp >> 6] >> (cp & 63)) & 1;
    } else {
      for (const auto& [lo, hi] : cc.ranges) {
        if (lo <= cp && cp <= hi) {
          found = true;
          break;
        }
      }
    }
  }
  return found != cc.negated;
}

// ref: llama_grammar_match_partial_char
bool GrammarMatcher::match_partial(uint32_t pos, PartialUtf8 partial) const {
  const auto& el = grammar_->elements();
  const bool positive = el[pos].type != ElementType::CharNot;
  const int n_remain = partial.n_remain;
  // An invalid sequence, or a 7-bit character split over two bytes (overlong).
  if (n_remain < 0 || (n_remain == 1 && partial.value < 2)) return false;
  uint32_t low = partial.value << (n_remain * 6);
  const uint32_t high = low | ((1u << (n_remain * 6)) - 1);
  if (low == 0) {
    if (n_remain == 2) {
      low = 1u << 11;
    } else if (n_remain == 3) {
      low = 1u << 16;
    }
  }
  uint32_t p = pos;
  do {
    if (el[p].type == ElementType::CharAny) return true;
    if (el[p + 1].type == ElementType::CharRangeUpper) {
      if (el[p].value <= high && low <= el[p + 1].value) return positive;
      p += 2;
    } else {
      if (low <= el[p].value && el[p].value <= high) return positive;
      p += 1;
    }
  } while (el[p].type == ElementType::CharAlt);
  return !positive;
}

const std::vector<StackId>& GrammarMatcher::memoised(Memo& memo, StackId s,
                                                     std::vector<StackId> (GrammarMatcher::*compute)(StackId)) {
  if (s < memo.done.size() && memo.done[s]) return memo.value[s];
  std::vector<StackId> result = (this->*compute)(s);  // may intern new stacks
  if (budget_.exhausted()) {  // a partial answer: never memoised (the matcher is spent anyway)
    spent_ = std::move(result);
    return spent_;
  }
  if (memo.done.size() < nodes_.size()) {
    memo.done.resize(nodes_.size() * 2, 0);
    memo.value.resize(nodes_.size() * 2);
  }
  memo.value[s] = std::move(result);
  memo.done[s] = 1;
  return memo.value[s];
}

const std::vector<StackId>& GrammarMatcher::expand(StackId s) { return memoised(expanded_, s, &GrammarMatcher::compute_expand); }

const std::vector<StackId>& GrammarMatcher::after_char(StackId s) {
  return memoised(after_char_, s, &GrammarMatcher::compute_after_char);
}

std::vector<StackId> GrammarMatcher::compute_expand(StackId s) {
  const auto& el = grammar_->elements();
  std::vector<StackId> result;
  std::vector<StackId> todo{s};
  std::unordered_set<StackId> seen;
  while (!todo.empty()) {
    const StackId cur = todo.back();
    todo.pop_back();
    if (!budget_.spend(kHashUnits)) break;
    if (!seen.insert(cur).second) continue;
    if (cur == kEmptyStack) {
      if (!add(result, cur)) break;
      continue;
    }
    const uint32_t pos = nodes_[cur].pos;
    const Element& e = el[pos];
    if (e.type == ElementType::RuleRef) {
      const StackId below = nodes_[cur].parent;
      uint32_t sub = grammar_->rule_start(e.value);
      while (true) {
        StackId next = below;
        if (!is_end_of_sequence(el[pos + 1].type)) next = push(next, pos + 1);
        if (!is_end_of_sequence(el[sub].type)) next = push(next, sub);
        todo.push_back(next);
        if (!budget_.spend(2 * kHashUnits)) break;
        while (!is_end_of_sequence(el[sub].type)) ++sub;
        if (el[sub].type != ElementType::Alt) break;
        ++sub;
      }
    } else {
      KILN_ASSERT(is_char_class_start(e.type) || is_token_element(e.type), "grammar: stack on a non-terminal element");
      if (!add(result, cur)) break;
    }
  }
  return result;
}

std::vector<StackId> GrammarMatcher::compute_after_char(StackId s) {
  const uint32_t after = classes_[nodes_[s].pos].after;
  StackId next = nodes_[s].parent;
  if (!is_end_of_sequence(grammar_->elements()[after].type)) next = push(next, after);
  return expand(next);
}

std::vector<StackId> GrammarMatcher::after_token(StackId s) {
  const uint32_t pos = nodes_[s].pos;
  StackId next = nodes_[s].parent;
  if (!is_end_of_sequence(grammar_->elements()[pos + 1].type)) next = push(next, pos + 1);
  return expand(next);
}

// ref: llama_grammar_accept_token
Status GrammarMatcher::accept_token(int32_t token, std::string_view piece) {
  if (budget_.exhausted()) return make_error(budget_.message());
  const DecodedPiece decoded = decode_piece(piece, partial_);
  std::vector<StackId> new_stacks;
  std::vector<StackId> current, next;
  for (StackId s : stacks_) {
    if (s == kEmptyStack) continue;
    const Element& e = top_element(s);
    if (is_token_element(e.type)) {
      const bool match = (e.type == ElementType::Token) == (e.value == static_cast<uint32_t>(token));
      if (match) {
        for (StackId x : after_token(s)) add(new_stacks, x);
      }
      continue;
    }
    current.assign(1, s);
    for (uint32_t cp : decoded.code_points) {
      next.clear();
      for (StackId c : current) {
        if (c == kEmptyStack || is_token_element(top_element(c).type)) continue;
        if (!budget_.spend(1) || !match_char(top(c), cp)) continue;
        for (StackId x : after_char(c)) add(next, x);
      }
      current.swap(next);
      if (current.empty()) break;
    }
    for (StackId x : current) add(new_stacks, x);
    if (budget_.exhausted()) return make_error(budget_.message());
  }
  if (budget_.exhausted()) return make_error(budget_.message());
  if (new_stacks.empty()) return make_error("grammar: token ", token, " ('", std::string(piece), "') does not continue the grammar");
  stacks_ = std::move(new_stacks);
  partial_ = decoded.partial;
  if (nodes_.size() > kCompactNodes) compact();
  budget_.restart();
  return ok_status();
}

void GrammarMatcher::compact() {
  std::vector<Node> old = std::move(nodes_);
  nodes_.clear();
  interned_.clear();
  expanded_ = {};
  after_char_ = {};
  nodes_.push_back({0, kEmptyStack});
  // Re-intern each live stack bottom-up.
  for (StackId& s : stacks_) {
    std::vector<uint32_t> positions;
    for (StackId x = s; x != kEmptyStack; x = old[x].parent) positions.push_back(old[x].pos);
    StackId fresh = kEmptyStack;
    for (auto it = positions.rbegin(); it != positions.rend(); ++it) fresh = push(fresh, *it);
    s = fresh;
  }
  ++generation_;
}

}  // namespace kiln::grammar
