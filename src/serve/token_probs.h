// Log-probabilities of one position's tokens for logprobs reporting: the log-softmax over the
// model's raw logits (the full vocabulary, before any sampling transform), as llama-server reports
// them by default (n_probs without post_sampling_probs).
// Stateless; safe from any thread.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace kiln::serve {

struct TokenLogprob {
  int32_t id;
  float logprob;
};

struct PositionLogprobs {
  float chosen;                   // log p(token) of the token that was sampled
  std::vector<TokenLogprob> top;  // the n_top most likely tokens, logprob descending (ties: lower id)
};

// `logits` [n_vocab], non-empty; `token` in [0, n_vocab); n_top >= 0 (capped at n_vocab).
// ref: log_softmax(x)_i = x_i - (m + log(sum_j exp(x_j - m))), m = max_j x_j; the sum is
// accumulated in double.
PositionLogprobs position_logprobs(std::span<const float> logits, int32_t token, int32_t n_top);

}  // namespace kiln::serve
