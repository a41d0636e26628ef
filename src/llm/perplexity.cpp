#include "llm/perplexity.h"

#include <algorithm>
#include <cmath>

#include "core/check.h"
#include "llm/context.h"

namespace kiln {

double log_prob(std::span<const float> logits, int32_t target) {
  KILN_ASSERT(target >= 0 && static_cast<size_t>(target) < logits.size(), "log_prob: target out of range");
  const float max_logit = *std::max_element(logits.begin(), logits.end());
  double sum = 0.0;
  for (float l : logits) sum += std::exp(static_cast<double>(l) - max_logit);
  return static_cast<double>(logits[static_cast<size_t>(target)]) - max_logit - std::log(sum);
}

void log_softmax(std::span<const float> logits, std::span<double> out) {
  KILN_ASSERT(out.size() == logits.size(), "log_softmax: size mismatch");
  const float max_logit = *std::max_element(logits.begin(), logits.end());
  double sum = 0.0;
  for (float l : logits) sum += std::exp(static_cast<double>(l) - max_logit);
  const double log_sum = std::log(sum);
  for (size_t i = 0; i < logits.size(); ++i) out[i] = static_cast<double>(logits[i]) - max_logit - log_sum;
}

double NllAccumulator::perplexity() const {
  return count_ ? std::exp(sum_ / static_cast<double>(count_)) : 0.0;
}

double NllAccumulator::perplexity_error() const {
  if (count_ < 2) return 0.0;
  const double mean = sum_ / static_cast<double>(count_);
  const double var = sum2_ / static_cast<double>(count_) - mean * mean;
  return var > 0.0 ? perplexity() * std::sqrt(var / static_cast<double>(count_ - 1)) : 0.0;
}

double kl_divergence(std::span<const double> base_logp, std::span<const double> logp) {
  KILN_ASSERT(base_logp.size() == logp.size(), "kl_divergence: size mismatch");
  double kld = 0.0;
  for (size_t i = 0; i < logp.size(); ++i) {
    const double p = std::exp(base_logp[i]);
    if (p > 0.0) kld += p * (base_logp[i] - logp[i]);
  }
  return kld;
}

void KlStats::add(std::span<const double> base_logp, std::span<const double> logp) {
  const double k = kl_divergence(base_logp, logp);
  kld_sum += k;
  kld_sum2 += k * k;
  ++tokens;
  const auto top = [](std::span<const double> v) { return std::max_element(v.begin(), v.end()) - v.begin(); };
  if (top(base_logp) == top(logp)) ++same_top;
}

double KlStats::mean_error() const {
  if (tokens < 2) return 0.0;
  const double m = mean();
  const double var = kld_sum2 / static_cast<double>(tokens) - m * m;
  return var > 0.0 ? std::sqrt(var / static_cast<double>(tokens - 1)) : 0.0;
}

int64_t chunk_count(int64_t n_tokens, const ChunkScoring& opt) {
  const int64_t n = n_tokens / opt.n_ctx;
  return opt.max_chunks > 0 ? std::min(n, opt.max_chunks) : n;
}

// ref: llama.cpp tools/perplexity (perplexity()): the first half of each chunk is context only.
Status score_chunks(Context& ctx, std::span<const int32_t> tokens, const ChunkScoring& opt,
                    const std::function<Status(std::span<const float>, int32_t)>& on_token,
                    const std::function<void(int64_t)>& on_chunk) {
  const auto n_tokens = static_cast<int64_t>(tokens.size());
  if (opt.n_ctx < 2 || n_tokens < 2 * opt.n_ctx)
    return make_error("perplexity: the text has ", n_tokens, " tokens; scoring needs at least 2 * n_ctx = ",
                      2 * opt.n_ctx);
  if (opt.n_ctx > ctx.n_ctx())
    return make_error("perplexity: chunks of ", opt.n_ctx, " tokens exceed the context size ", ctx.n_ctx());
  const int64_t first = opt.n_ctx / 2;
  const int64_t n_chunks = chunk_count(n_tokens, opt);
  Batch batch;
  for (int64_t chunk = 0; chunk < n_chunks; ++chunk) {
    const int64_t start = chunk * opt.n_ctx;
    ctx.clear();
    batch.clear();
    for (int64_t j = 0; j < opt.n_ctx; ++j) {
      const int32_t t = (j == 0 && opt.bos >= 0) ? opt.bos : tokens[static_cast<size_t>(start + j)];
      batch.add(t, static_cast<int32_t>(j), 0, j >= first && j + 1 < opt.n_ctx);
    }
    KILN_TRY(ctx.decode(batch));
    for (int64_t j = first; j + 1 < opt.n_ctx; ++j)
      KILN_TRY(on_token(ctx.logits(static_cast<size_t>(j)), tokens[static_cast<size_t>(start + j + 1)]));
    if (on_chunk) on_chunk(chunk + 1);
  }
  return ok_status();
}

}  // namespace kiln
