#include "llm/sampler.h"

#include "llm/reasoning_budget.h"
#include "text/grammar/grammar_constraint.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

namespace kiln {
namespace sampling {
namespace {

void sort_by_logit(std::vector<Candidate>& c) {
  std::sort(c.begin(), c.end(), [](const Candidate& a, const Candidate& b) {
    return a.logit > b.logit || (a.logit == b.logit && a.id < b.id);
  });
}

}  // namespace

// ref: llama.cpp llama_sampler_softmax_impl (max-subtracted exponentials, normalised)
void softmax(std::vector<Candidate>& c) {
  if (c.empty()) return;
  sort_by_logit(c);
  const float max_logit = c.front().logit;
  float sum = 0.0f;
  for (auto& x : c) {
    x.p = std::exp(x.logit - max_logit);
    sum += x.p;
  }
  for (auto& x : c) x.p /= sum;
}

void top_k(std::vector<Candidate>& c, int32_t k) {
  if (k <= 0 || static_cast<size_t>(k) >= c.size()) {
    sort_by_logit(c);
    return;
  }
  std::partial_sort(c.begin(), c.begin() + k, c.end(), [](const Candidate& a, const Candidate& b) {
    return a.logit > b.logit || (a.logit == b.logit && a.id < b.id);
  });
  c.resize(static_cast<size_t>(k));
}

// ref: llama.cpp llama_sampler_top_p_apply: keep the smallest prefix whose mass reaches p.
void top_p(std::vector<Candidate>& c, float p, size_t min_keep) {
  if (p >= 1.0f || c.empty()) return;
  softmax(c);
  float cum = 0.0f;
  size_t last = c.size();
  for (size_t i = 0; i < c.size(); ++i) {
    cum += c[i].p;
    if (cum >= p && i + 1 >= min_keep) {
      last = i + 1;
      break;
    }
  }
  c.resize(last);
}

// ref: llama.cpp llama_sampler_min_p_apply: keep logits >= max + log(p).
void min_p(std::vector<Candidate>& c, float p, size_t min_keep) {
  if (p <= 0.0f || c.empty()) return;
  sort_by_logit(c);
  const float threshold = c.front().logit + std::log(p);
  size_t keep = 0;
  while (keep < c.size() && (c[keep].logit >= threshold || keep < min_keep)) ++keep;
  c.resize(keep);
}

// ref: llama.cpp llama_sampler_typical_apply (locally typical sampling, Meister et al. 2022)
void typical(std::vector<Candidate>& c, float p, size_t min_keep) {
  if (p >= 1.0f || c.empty()) return;
  softmax(c);
  float entropy = 0.0f;
  for (const auto& x : c) {
    if (x.p > 0.0f) entropy -= x.p * std::log(x.p);
  }
  std::vector<float> shifted(c.size());
  for (size_t i = 0; i < c.size(); ++i) shifted[i] = std::fabs(-std::log(c[i].p) - entropy);
  std::vector<size_t> order(c.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return shifted[a] < shifted[b]; });
  float cum = 0.0f;
  size_t last = order.size();
  for (size_t i = 0; i < order.size(); ++i) {
    cum += c[order[i]].p;
    if (cum > p && i + 1 >= min_keep) {
      last = i + 1;
      break;
    }
  }
  std::vector<Candidate> kept;
  kept.reserve(last);
  for (size_t i = 0; i < last; ++i) kept.push_back(c[order[i]]);
  c = std::move(kept);
  sort_by_logit(c);
}

void temperature(std::vector<Candidate>& c, float t) {
  if (t <= 0.0f) {
    // Greedy: only the best candidate survives.
    sort_by_logit(c);
    // erase, not resize(1): GCC 12 inlines resize()'s growing path too and reports a false
    // -Warray-bounds on it (the vector is never grown here).
    if (c.size() > 1) c.erase(c.begin() + 1, c.end());
    return;
  }
  for (auto& x : c) x.logit /= t;
}

int32_t argmax(std::span<const float> logits) {
  KILN_ASSERT(!logits.empty(), "argmax of no logits");
  return static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
}

}  // namespace sampling

Result<Sampler> Sampler::create(const SamplerParams& params, int32_t n_vocab) {
  if (n_vocab <= 0) return make_error("sampler: vocabulary size ", n_vocab, " must be positive");
  if (params.top_p < 0.0f || params.min_p < 0.0f || params.min_p > 1.0f || params.typical_p < 0.0f)
    return make_error("sampler: top_p, min_p and typical_p must lie in [0, 1] (top_p ", params.top_p,
                      ", min_p ", params.min_p, ", typical_p ", params.typical_p, ")");
  if (params.repeat_penalty <= 0.0f)
    return make_error("sampler: repeat_penalty ", params.repeat_penalty, " must be positive");
  if (params.penalty_last_n < -1) return make_error("sampler: penalty_last_n ", params.penalty_last_n, " < -1");
  for (const auto& [id, bias] : params.logit_bias) {
    if (id < 0 || id >= n_vocab)
      return make_error("sampler: logit_bias token id ", id, " outside the vocabulary [0, ", n_vocab, ")");
  }
  return Sampler(params, n_vocab);
}

Sampler::Sampler(const SamplerParams& params, int32_t n_vocab)
    : params_(params), n_vocab_(n_vocab), rng_(params.seed) {
  candidates_.reserve(static_cast<size_t>(n_vocab));
}

Sampler::Sampler(Sampler&&) noexcept = default;
Sampler& Sampler::operator=(Sampler&&) noexcept = default;
Sampler::~Sampler() = default;

void Sampler::set_grammar(std::unique_ptr<grammar::GrammarConstraint> grammar) {
  KILN_ASSERT(grammar == nullptr || grammar->vocab().n_tokens() == n_vocab_, "sampler: grammar vocabulary size != n_vocab");
  grammar_ = std::move(grammar);
  grammar_error_.clear();
}

void Sampler::set_reasoning_budget(std::unique_ptr<ReasoningBudget> budget) { budget_ = std::move(budget); }

bool Sampler::force_reasoning_end() { return budget_ != nullptr && budget_->force_end(); }

void Sampler::accept(int32_t token) {
  // ref: common_sampler_accept: the reasoning budget, the grammar, then the chain's history.
  if (budget_ != nullptr) budget_->accept(token);
  if (grammar_ != nullptr && grammar_error_.empty()) {
    if (const Status s = grammar_->accept(token); !s.ok()) grammar_error_ = s.error().message;
  }
  accept_prompt(token);
}

void Sampler::accept_prompt(int32_t token) {
  if (params_.penalty_last_n == 0) return;
  history_.push_back(token);
  ++counts_[token];
  if (params_.penalty_last_n > 0 && history_.size() > static_cast<size_t>(params_.penalty_last_n)) {
    const int32_t old = history_.front();
    history_.pop_front();
    if (--counts_[old] == 0) counts_.erase(old);
  }
}

void Sampler::reset_history() {
  history_.clear();
  counts_.clear();
  if (grammar_ != nullptr) grammar_->reset();
  grammar_error_.clear();
  if (budget_ != nullptr) budget_->reset();
}

// ref: llama.cpp llama_sampler_penalties_apply (repeat penalty divides positive logits and
// multiplies negative ones; frequency and presence penalties subtract, OpenAI style)
void Sampler::apply_penalties() {
  const bool active = params_.repeat_penalty != 1.0f || params_.frequency_penalty != 0.0f ||
                      params_.presence_penalty != 0.0f;
  if (!active || counts_.empty()) return;
  for (auto& c : candidates_) {
    auto it = counts_.find(c.id);
    if (it == counts_.end()) continue;
    const int32_t count = it->second;
    if (c.logit <= 0.0f) {
      c.logit *= params_.repeat_penalty;
    } else {
      c.logit /= params_.repeat_penalty;
    }
    c.logit -= static_cast<float>(count) * params_.frequency_penalty + (count > 0 ? 1.0f : 0.0f) * params_.presence_penalty;
  }
}

std::optional<int32_t> Sampler::sample_chain(std::span<const float> logits, const std::vector<uint8_t>* allowed) {
  candidates_.clear();
  for (int32_t i = 0; i < n_vocab_; ++i) candidates_.push_back({i, logits[static_cast<size_t>(i)], 0.0f});
  for (const auto& [id, bias] : params_.logit_bias) candidates_[static_cast<size_t>(id)].logit += bias;
  apply_penalties();
  if (allowed != nullptr) {
    // The grammar's refusals (-inf in llama.cpp, where they can never be drawn) leave the chain.
    std::erase_if(candidates_, [&](const Candidate& c) {
      return (*allowed)[static_cast<size_t>(c.id)] == 0 || c.logit == -INFINITY;
    });
    if (candidates_.empty()) return std::nullopt;
  }

  const size_t min_keep = static_cast<size_t>(std::max(1, params_.min_keep));
  if (params_.temperature <= 0.0f) {
    // Greedy: the highest logit, the lowest id among equal ones (what sorting puts first), found
    // without sorting the vocabulary.
    Candidate best = *std::max_element(candidates_.begin(), candidates_.end(), [](const Candidate& a, const Candidate& b) {
      return a.logit < b.logit || (a.logit == b.logit && a.id > b.id);
    });
    best.p = 1.0f;
    candidates_.assign(1, best);
    return best.id;
  }
  sampling::top_k(candidates_, params_.top_k);
  sampling::typical(candidates_, params_.typical_p, min_keep);
  sampling::top_p(candidates_, params_.top_p, min_keep);
  sampling::min_p(candidates_, params_.min_p, min_keep);
  sampling::temperature(candidates_, params_.temperature);
  sampling::softmax(candidates_);
  // A seeded draw over the cumulative distribution.
  std::uniform_real_distribution<double> uniform(0.0, 1.0);
  const double r = uniform(rng_);
  double cum = 0.0;
  for (const auto& c : candidates_) {
    cum += c.p;
    if (r < cum) return c.id;
  }
  return candidates_.back().id;
}

// ref: llama.cpp common_sampler_sample (grammar_first = false): sample, check the one token
// against the grammar, and only when it is refused apply the grammar to every candidate and
// sample again.
int32_t Sampler::sample(std::span<const float> logits) {
  KILN_ASSERT(logits.size() == static_cast<size_t>(n_vocab_), "sampler: logits size != n_vocab");
  if (const auto forced = budget_ != nullptr ? budget_->forced_token() : std::nullopt) {
    // ref: the budget stage sets every other logit to -inf before the chain (which still draws).
    std::vector<uint8_t> only(static_cast<size_t>(n_vocab_), 0);
    only[static_cast<size_t>(*forced)] = 1;
    if (sample_chain(logits, &only)) return *forced;
    candidates_.assign(1, Candidate{*forced, logits[static_cast<size_t>(*forced)], 1.0f});
    return *forced;
  }
  const int32_t first = *sample_chain(logits, nullptr);
  if (grammar_ == nullptr || !grammar_error_.empty() || grammar_->allows(first)) return first;
  if (!grammar_->failed()) {
    const std::vector<uint8_t>& allowed = grammar_->allowed();
    if (!grammar_->failed()) {
      if (const auto constrained = sample_chain(logits, &allowed)) return *constrained;
      grammar_error_ = "grammar: no token of the vocabulary continues the grammar";
    }
  }
  if (grammar_->failed()) grammar_error_ = grammar_->failure();
  for (int32_t id = 0; id < grammar_->vocab().n_tokens(); ++id) {
    if (grammar_->vocab().kind(id) == grammar::GrammarVocab::Kind::EndOfGen) return id;
  }
  return first;
}

}  // namespace kiln
