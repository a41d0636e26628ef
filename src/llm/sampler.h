// Token sampling: a chain of stages over the logits of one position, as llama.cpp's common
// sampler chain applies them (logit bias, penalties, top-k, typical, top-p, min-p, temperature,
// then a seeded draw or greedy argmax). Deterministic for a seed.
// Thread-safety: a Sampler is used by one sequence at a time; separate sequences own separate
// samplers.
#pragma once

#include <cstdint>
#include <deque>
#include <random>
#include <span>
#include <unordered_map>
#include <vector>

#include "core/result.h"

namespace kiln {

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

  // Draws the next token from the logits of one position ([n_vocab]).
  int32_t sample(std::span<const float> logits);
  // Records a token of the sequence (prompt or generated) for the penalties.
  void accept(int32_t token);
  // Forgets the history (not the RNG state).
  void reset_history();

  // The candidates left after the last sample() call's filtering stages, sorted by logit
  // descending, with probabilities: what logprobs reporting reads.
  const std::vector<Candidate>& last_candidates() const { return candidates_; }

 private:
  Sampler(const SamplerParams& params, int32_t n_vocab);
  void apply_penalties();

  SamplerParams params_;
  int32_t n_vocab_;
  std::mt19937_64 rng_;
  std::deque<int32_t> history_;                   // last penalty_last_n tokens
  std::unordered_map<int32_t, int32_t> counts_;   // token -> occurrences in history_
  std::vector<Candidate> candidates_;
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
