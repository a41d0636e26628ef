#include "text/grammar/grammar_constraint.h"

#include <algorithm>
#include <regex>

namespace kiln::grammar {
namespace {

// Whole-vocabulary answers kept per parse state (a JSON document revisits a handful of them).
constexpr size_t kCachedMasks = 8;
// Work units of visiting one trie node, or decoding one token's piece (reading memory that is
// rarely in cache: a trie of a million nodes), beside those of the parse positions checked there.
constexpr uint64_t kNodeUnits = 32;

}  // namespace

// By index of spec_.triggers; unused entries for words and tokens.
struct GrammarConstraint::Patterns {
  std::vector<std::regex> regex;
};

GrammarConstraint::~GrammarConstraint() = default;

Result<std::unique_ptr<GrammarConstraint>> GrammarConstraint::create(const GrammarSpec& spec,
                                                                     std::shared_ptr<const GrammarVocab> vocab,
                                                                     const text::Tokenizer* tokenizer) {
  KILN_ASSIGN_OR_RETURN(Grammar g, Grammar::parse(spec.gbnf, {.tokenizer = tokenizer}));
  if (spec.lazy && spec.triggers.empty()) return make_error("grammar: a lazy grammar needs at least one trigger");
  GrammarSpec normalised = spec;
  auto patterns = std::make_shared<Patterns>();
  for (Trigger& t : normalised.triggers) {
    patterns->regex.emplace_back();
    switch (t.type) {
      case Trigger::Type::Token:
        if (t.token < 0 || t.token >= vocab->n_tokens())
          return make_error("grammar: trigger token ", t.token, " outside the vocabulary [0, ", vocab->n_tokens(), ")");
        break;
      case Trigger::Type::Word:
        if (t.value.empty()) return make_error("grammar: an empty trigger word");
        break;
      case Trigger::Type::Pattern:
      case Trigger::Type::PatternFull: {
        // ref: common_sampler_init: a full pattern is anchored at both ends.
        std::string pattern = t.value;
        if (t.type == Trigger::Type::PatternFull) {
          if (pattern.empty() || pattern.front() != '^') pattern.insert(0, "^");
          if (pattern.size() == 1 || pattern.back() != '$') pattern += '$';
        }
        try {
          patterns->regex.back() = std::regex(pattern, std::regex::ECMAScript);
        } catch (const std::regex_error& e) {
          return make_error("grammar: trigger pattern '", t.value, "': ", e.what());
        }
        t.value = std::move(pattern);
        break;
      }
    }
  }
  std::unique_ptr<GrammarConstraint> c(new GrammarConstraint(std::make_shared<const Grammar>(std::move(g)),
                                                             std::move(vocab), std::move(normalised),
                                                             std::move(patterns)));
  if (c->failed()) return make_error(c->failure());
  return c;
}

void GrammarConstraint::set_interrupt(const std::atomic<bool>* flag) {
  interrupt_ = flag;
  matcher_.budget().set_interrupt(flag);
}

GrammarConstraint::GrammarConstraint(std::shared_ptr<const Grammar> grammar,
                                     std::shared_ptr<const GrammarVocab> vocab, GrammarSpec spec,
                                     std::shared_ptr<const Patterns> patterns)
    : grammar_(std::move(grammar)),
      vocab_(std::move(vocab)),
      spec_(std::move(spec)),
      patterns_(std::move(patterns)),
      matcher_(grammar_, spec_.work_limit),
      awaiting_trigger_(spec_.lazy) {
  cache_.reserve(kCachedMasks);
}

void GrammarConstraint::reset() {
  matcher_ = GrammarMatcher(grammar_, spec_.work_limit);
  matcher_.budget().set_interrupt(interrupt_);
  awaiting_trigger_ = spec_.lazy;
  trigger_buffer_.clear();
  buffered_.clear();
  cache_.clear();
  current_ = nullptr;
}

bool GrammarConstraint::accepts_end(const std::vector<StackId>& live, PartialUtf8 end) const {
  for (StackId s : live) {
    if (end.n_remain == 0) return true;
    if (s != kEmptyStack && !is_token_element(matcher_.top_element(s).type) && matcher_.match_partial(matcher_.top(s), end))
      return true;
  }
  return false;
}

// ref: llama_grammar_reject_candidates_for_stack, for one candidate over all stacks.
bool GrammarConstraint::walk(int32_t id, const uint32_t* cps, size_t n, PartialUtf8 end) {
  if (end.n_remain < 0) return false;
  std::vector<StackId> live = matcher_.stacks(), next;
  for (size_t i = 0; i < n; ++i) {
    next.clear();
    for (StackId s : live) {
      if (s == kEmptyStack) continue;
      if (!matcher_.budget().spend(1)) return false;
      const Element& e = matcher_.top_element(s);
      if (is_token_element(e.type)) {
        // A token element in the middle of a piece matches the candidate's id.
        if ((e.type == ElementType::Token) == (e.value == static_cast<uint32_t>(id))) return true;
        continue;
      }
      if (!matcher_.match_char(matcher_.top(s), cps[i])) continue;
      for (StackId x : matcher_.after_char(s)) matcher_.add(next, x);
    }
    if (failed()) return false;
    live.swap(next);
    if (live.empty()) return false;
  }
  return accepts_end(live, end);
}

bool GrammarConstraint::allows(int32_t token) {
  if (awaiting_trigger_) return true;
  if (failed()) return false;
  if (token < 0 || token >= vocab_->n_tokens()) return false;
  if (current_ != nullptr) return (*current_)[static_cast<size_t>(token)] != 0;
  switch (vocab_->kind(token)) {
    case GrammarVocab::Kind::EndOfGen: return matcher_.complete();
    case GrammarVocab::Kind::Empty: return false;
    case GrammarVocab::Kind::Text: break;
  }
  if (matcher_.partial().n_remain != 0) {
    const DecodedPiece d = decode_piece(vocab_->piece(token), matcher_.partial());
    return walk(token, d.code_points.data(), d.code_points.size(), d.partial);
  }
  return walk(token, vocab_->code_points(token), vocab_->n_code_points(token), vocab_->trailing_partial(token));
}

void GrammarConstraint::mark(uint32_t node, size_t depth, std::vector<uint8_t>& out) {
  const auto& trie = vocab_->trie();
  const auto& by_node = vocab_->tokens_by_node();
  const std::vector<StackId>& live = levels_[depth];
  // Tokens whose code points end here, each checked against the live stacks.
  const uint32_t n_ending = vocab_->tok_end_at(node) - trie[node].tok_begin;
  if (!matcher_.budget().spend(kNodeUnits + (uint64_t{n_ending} + 1) * (live.size() + 1))) return;
  for (uint32_t i = trie[node].tok_begin, end = vocab_->tok_end_at(node); i < end; ++i) {
    const int32_t id = by_node[i];
    if (accepts_end(live, vocab_->trailing_partial(id))) out[static_cast<size_t>(id)] = 1;
  }
  // Token elements on top: the tokens that go on past this node match by id.
  for (StackId s : live) {
    if (s == kEmptyStack) continue;
    const Element& e = matcher_.top_element(s);
    if (e.type == ElementType::Token) {
      const auto id = static_cast<int32_t>(e.value);
      if (id < vocab_->n_tokens()) {
        const uint32_t n = vocab_->node_of(id);
        if (n != UINT32_MAX && n > node && n < trie[node].end) out[static_cast<size_t>(id)] = 1;
      }
    } else if (e.type == ElementType::TokenNot) {
      const uint32_t begin = vocab_->tok_end_at(node), end = vocab_->subtree_tok_end(node);
      if (!matcher_.budget().spend(end - begin)) return;
      for (uint32_t i = begin; i < end; ++i) {
        if (by_node[i] != static_cast<int32_t>(e.value)) out[static_cast<size_t>(by_node[i])] = 1;
      }
    }
  }
  // Children: the stacks that take each child's code point (levels_ is sized for the deepest
  // token, so these references stay valid through the recursion).
  for (uint32_t child = node + 1; child < trie[node].end; child = trie[child].end) {
    std::vector<StackId>& next = levels_[depth + 1];
    next.clear();
    if (!matcher_.budget().spend(levels_[depth].size())) return;
    for (StackId s : levels_[depth]) {
      if (s == kEmptyStack || is_token_element(matcher_.top_element(s).type)) continue;
      if (!matcher_.match_char(matcher_.top(s), trie[child].cp)) continue;
      for (StackId x : matcher_.after_char(s)) matcher_.add(next, x);
    }
    if (failed()) return;
    if (!next.empty()) mark(child, depth + 1, out);
  }
}

void GrammarConstraint::compute_slow(std::vector<uint8_t>& out) {
  for (int32_t id = 0; id < vocab_->n_tokens() && !failed(); ++id) {
    if (vocab_->kind(id) != GrammarVocab::Kind::Text || !matcher_.budget().spend(kNodeUnits)) continue;
    const DecodedPiece d = decode_piece(vocab_->piece(id), matcher_.partial());
    if (walk(id, d.code_points.data(), d.code_points.size(), d.partial)) out[static_cast<size_t>(id)] = 1;
  }
}

const std::vector<uint8_t>& GrammarConstraint::allowed() {
  const auto n = static_cast<size_t>(vocab_->n_tokens());
  if (awaiting_trigger_) {
    all_allowed_.assign(n, 1);
    return all_allowed_;
  }
  if (current_ != nullptr) return *current_;
  ++uses_;
  const bool cacheable = matcher_.partial().n_remain == 0;
  if (cacheable) {
    for (CachedMask& c : cache_) {
      if (c.generation == matcher_.generation() && c.stacks == matcher_.stacks()) {
        c.last_use = uses_;
        current_ = &c.mask;
        return c.mask;
      }
    }
  }
  // Reuse the least recently used entry (or grow the cache).
  CachedMask* slot;
  if (cache_.size() < kCachedMasks) {
    slot = &cache_.emplace_back();
  } else {
    slot = &*std::min_element(cache_.begin(), cache_.end(),
                              [](const CachedMask& a, const CachedMask& b) { return a.last_use < b.last_use; });
  }
  slot->stacks = matcher_.stacks();
  slot->generation = cacheable ? matcher_.generation() : UINT64_MAX;  // a slow-path mask is never found again
  slot->last_use = uses_;
  slot->mask.assign(n, 0);
  if (cacheable) {
    levels_.resize(vocab_->max_code_points() + 2);
    levels_[0] = matcher_.stacks();
    mark(0, 0, slot->mask);
  } else {
    compute_slow(slot->mask);
  }
  const bool eog_ok = matcher_.complete();
  for (size_t id = 0; id < n; ++id) {
    if (vocab_->kind(static_cast<int32_t>(id)) == GrammarVocab::Kind::EndOfGen) slot->mask[id] = eog_ok ? 1 : 0;
  }
  current_ = &slot->mask;
  return slot->mask;
}

size_t GrammarConstraint::find_trigger(size_t i, size_t previous_size) const {
  const Trigger& t = spec_.triggers[i];
  if (t.type == Trigger::Type::Word) {
    // It was not in the buffer before this token, so a match overlaps the new text.
    const size_t from = previous_size >= t.value.size() ? previous_size - t.value.size() + 1 : 0;
    return trigger_buffer_.find(t.value, from);
  }
  // ref: llama_grammar_trigger_pattern::find: from the first non-empty capture group, else the
  // match; anchored patterns are tried against the whole output first.
  auto start_of = [](const std::smatch& m) {
    for (size_t i = 1; i < m.size(); ++i) {
      if (m.length(static_cast<int>(i)) > 0) return static_cast<size_t>(m.position(static_cast<int>(i)));
    }
    return static_cast<size_t>(m.position(0));
  };
  std::smatch m;
  if (!t.value.empty() && t.value.front() == '^' && t.value.back() == '$' &&
      std::regex_match(trigger_buffer_, m, patterns_->regex[i]))
    return start_of(m);
  if (std::regex_search(trigger_buffer_, m, patterns_->regex[i])) return start_of(m);
  return std::string::npos;
}

Status GrammarConstraint::replay_from(size_t start) {
  // ref: llama_grammar_accept_impl: the tokens overlapping [start, end) go to the grammar, the
  // first one cut at `start`. On an error the matcher is restored.
  GrammarMatcher before = matcher_;
  for (const BufferedToken& b : buffered_) {
    if (b.end <= start) continue;
    const size_t from = std::max(b.begin, start);
    const Status s = matcher_.accept_token(b.token, std::string_view(trigger_buffer_).substr(from, b.end - from));
    if (!s.ok()) {
      matcher_ = std::move(before);
      return s;
    }
  }
  trigger_buffer_.clear();
  buffered_.clear();
  return ok_status();
}

Status GrammarConstraint::accept(int32_t token) {
  if (token < 0 || token >= vocab_->n_tokens()) return make_error("grammar: token ", token, " outside the vocabulary");
  const std::string& piece = vocab_->piece(token);
  current_ = nullptr;
  if (awaiting_trigger_) {
    for (const Trigger& t : spec_.triggers) {
      if (t.type == Trigger::Type::Token && t.token == token) {
        KILN_TRY(matcher_.accept_token(token, piece));
        awaiting_trigger_ = false;
        trigger_buffer_.clear();
        buffered_.clear();
        return ok_status();
      }
    }
    const size_t previous = trigger_buffer_.size();
    buffered_.push_back({token, previous, previous + piece.size()});
    trigger_buffer_ += piece;
    for (size_t i = 0; i < spec_.triggers.size(); ++i) {
      if (spec_.triggers[i].type == Trigger::Type::Token) continue;
      const size_t start = find_trigger(i, previous);
      if (start == std::string::npos) continue;
      awaiting_trigger_ = false;
      const Status replayed = replay_from(start);
      if (!replayed.ok()) {  // leave the constraint as it was before this token
        awaiting_trigger_ = true;
        buffered_.pop_back();
        trigger_buffer_.resize(previous);
      }
      return replayed;
    }
    return ok_status();
  }
  if (vocab_->kind(token) == GrammarVocab::Kind::EndOfGen) {
    if (matcher_.complete()) return ok_status();
    return make_error("grammar: end of generation before the grammar is complete");
  }
  return matcher_.accept_token(token, piece);
}

Status GrammarConstraint::prefill(std::span<const int32_t> tokens) {
  for (int32_t t : tokens) KILN_TRY(accept(t));
  return ok_status();
}

}  // namespace kiln::grammar
