// Token sampling: a chain of stages over the logits of one position, as llama.cpp's common
// sampler chain applies them (logit bias, penalties, top-k, typical, top-p, min-p, temperature,
// then a seeded draw or greedy argmax). Deterministic for a seed.
//
// With a grammar attached (set_grammar), sample() follows llama.cpp's common_sampler_sample: the
// chain picks a token from the unconstrained logits; if the grammar refuses it, the logits are
// taken again, the grammar's refusals removed, and the chain picks again (a second draw). Tokens
// generated must then go through accept() (which advances the grammar), prompt tokens through
// accept_prompt() (which does not).
// With a reasoning budget attached (set_reasoning_budget), a position the budget forces takes the
// forced token (the chain runs over it alone, as llama.cpp's budget stage leaves only it finite)
// and the grammar is not consulted for it.
// Thread-safety: a Sampler is used by one sequence at a time; separate sequences own separate
// samplers.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <random>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/result.h"

namespace kiln::grammar {
class GrammarConstraint;
}

namespace kiln {

class ReasoningBudget;

struct SamplerParams {
  uint64_t seed = 0xFFFFFFFF;   // llama.cpp's LLAMA_DEFAULT_SEED; any value is deterministic
  float temperature = 0.8f;     // <= 0: greedy (argmax)
  int32_t top_k = 40;           // <= 0: off
  float top_p = 0.95f;          // >= 1: off
  float min_p = 0.05f;          // <= 0: off
  float typical_p = 1.0f;       // >= 1: off
  int32_t penalty_last_n = 64;  // window of recent tokens the penalties look at; -1: whole history
  float repeat_penalty = 1.0f;  // 1: off
  float frequency_penalty = 0.0f;
  float presence_penalty = 0.0f;
  std::vector<std::pair<int32_t, float>> logit_bias;  // token id -> added to its logit (-inf bans)
  int32_t min_keep = 1;         // top-p, min-p and typical keep at least this many candidates
};

struct Candidate {
  int32_t id;
  float logit;
  float p;  // probability after the last softmax (filled by stages that need it)
};

class Sampler {
 public:
  // Errors on parameters out of range (negative temperature is allowed: greedy) or logit-bias ids
  // outside [0, n_vocab).
  static Result<Sampler> create(const SamplerParams& params, int32_t n_vocab);
  Sampler(Sampler&&) noexcept;
  Sampler& operator=(Sampler&&) noexcept;
  ~Sampler();

  // Draws the next token from the logits of one position ([n_vocab]). Under a grammar that no
  // token of the vocabulary can continue, or that ran out of work (GrammarConstraint::failed():
  // its owner ends the generation), returns an end-of-generation token (or the unconstrained
  // choice when the vocabulary has none) and grammar_stalled() turns true.
  int32_t sample(std::span<const float> logits);
  // Records a generated token: the penalties' history and the grammar.
  void accept(int32_t token);
  // Records a prompt token (the penalties' history only; llama.cpp's is_generated = false).
  void accept_prompt(int32_t token);
  // A new reply: forgets the history and puts the grammar (if any) back at its start; the RNG
  // state stays.
  void reset_history();

  // Constrains sampling with a grammar (nullptr: none). The constraint's vocabulary must be the
  // model's (n_vocab entries).
  void set_grammar(std::unique_ptr<grammar::GrammarConstraint> grammar);
  grammar::GrammarConstraint* grammar() { return grammar_.get(); }
  const grammar::GrammarConstraint* grammar() const { return grammar_.get(); }
  // Caps the tokens of reasoning blocks (nullptr: none); reset_history() resets it too.
  void set_reasoning_budget(std::unique_ptr<ReasoningBudget> budget);
  const ReasoningBudget* reasoning_budget() const { return budget_.get(); }
  // Ends the reasoning block being counted (ReasoningBudget::force_end); false without a budget
  // or an open block.
  bool force_reasoning_end();
  // True after sample() found no token the grammar allows; the message says why.
  bool grammar_stalled() const { return !grammar_error_.empty(); }
  const std::string& grammar_error() const { return grammar_error_; }

  // The candidates left after the last sample() call's filtering stages, sorted by logit
  // descending, with probabilities: what logprobs reporting reads.
  const std::vector<Candidate>& last_candidates() const { return candidates_; }

 private:
  Sampler(const SamplerParams& params, int32_t n_vocab);
  void apply_penalties();
  // One pass of the chain; with `allowed`, tokens it marks 0 are removed after the logit biases
  // and penalties (where llama.cpp's grammar stage sets them to -inf). nullopt when no
  // candidate is left.
  std::optional<int32_t> sample_chain(std::span<const float> logits, const std::vector<uint8_t>* allowed);

  SamplerParams params_;
  int32_t n_vocab_;
  std::mt19937_64 rng_;
  std::deque<int32_t> history_;                   // last penalty_last_n tokens
  std::unordered_map<int32_t, int32_t> counts_;   // token -> occurrences in history_
  std::vector<Candidate> candidates_;
  std::unique_ptr<grammar::GrammarConstraint> grammar_;
  std::string grammar_error_;
  std::unique_ptr<ReasoningBudget> budget_;
};

// The stages, exposed for tests and for callers that build their own chains. Each works on
// `c` in place; "sorted" means by logit descending.
namespace sampling {
void softmax(std::vector<Candidate>& c);  // sorts, fills p
void top_k(std::vector<Candidate>& c, int32_t k);
void top_p(std::vector<Candidate>& c, float p, size_t min_keep);
void min_p(std::vector<Candidate>& c, float p, size_t min_keep);
void typical(std::vector<Candidate>& c, float p, size_t min_keep);
void temperature(std::vector<Candidate>& c, float t);
int32_t argmax(std::span<const float> logits);
}  // namespace sampling

}  // namespace kiln
