// Perplexity and KL-divergence statistics, computed the way llama.cpp's perplexity tool does:
// the text is cut into chunks of n_ctx tokens (the first replaced by BOS when the vocabulary adds
// one), and each chunk scores its second half, every token predicted from all tokens before it
// in the chunk.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "core/result.h"

namespace kiln {

// log softmax(logits)[target], in double precision with max subtraction.
double log_prob(std::span<const float> logits, int32_t target);
// log softmax of a whole row, into `out` (same size).
void log_softmax(std::span<const float> logits, std::span<double> out);

// Running mean of negative log-likelihoods with llama.cpp's uncertainty estimate.
class NllAccumulator {
 public:
  void add(double nll) {
    sum_ += nll;
    sum2_ += nll * nll;
    ++count_;
  }
  int64_t count() const { return count_; }
  double perplexity() const;
  // Standard error of the perplexity: ppl * sqrt((E[nll^2] - E[nll]^2) / (count - 1)).
  double perplexity_error() const;

 private:
  double sum_ = 0.0, sum2_ = 0.0;
  int64_t count_ = 0;
};

// KL divergence of a row from a base row, both as log-probabilities: sum p_base (log p_base - log p).
double kl_divergence(std::span<const double> base_logp, std::span<const double> logp);

struct KlStats {
  int64_t same_top = 0;         // tokens whose argmax agrees with the base's
  int64_t tokens = 0;
  double kld_sum = 0.0, kld_sum2 = 0.0;
  void add(std::span<const double> base_logp, std::span<const double> logp);
  double mean() const { return tokens ? kld_sum / static_cast<double>(tokens) : 0.0; }
  double mean_error() const;
  double same_top_fraction() const { return tokens ? static_cast<double>(same_top) / static_cast<double>(tokens) : 0.0; }
};

class Context;

struct ChunkScoring {
  int64_t n_ctx = 512;        // tokens per chunk; the second half of each is scored
  int64_t max_chunks = -1;    // -1: every whole chunk of the text
  int32_t bos = -1;           // replaces each chunk's first token when >= 0 (llama.cpp's add_bos)
};

// Number of chunks score_chunks() visits for `n_tokens` of text.
int64_t chunk_count(int64_t n_tokens, const ChunkScoring& opt);

// Scores `tokens` chunk by chunk on `ctx` (cleared before each chunk), calling on_token with the
// logits that predict each scored token and that token, and on_chunk after each chunk (1-based).
// Errors: fewer than 2 * n_ctx tokens, a decode failure, or an error returned by a callback.
Status score_chunks(Context& ctx, std::span<const int32_t> tokens, const ChunkScoring& opt,
                    const std::function<Status(std::span<const float> logits, int32_t target)>& on_token,
                    const std::function<void(int64_t chunk)>& on_chunk = {});

}  // namespace kiln
