#include "llm/speculative/verify.h"

namespace kiln {

// ref: llama.cpp common_sampler_sample_and_accept_n.
Verdict verify_draft(Sampler& sampler, std::span<const int32_t> draft,
                     const std::function<std::span<const float>(size_t)>& row_logits,
                     const std::function<void(size_t, int32_t)>& on_token) {
  Verdict v;
  v.tokens.reserve(draft.size() + 1);
  for (size_t i = 0; i <= draft.size(); ++i) {
    const int32_t token = sampler.sample(row_logits(i));
    sampler.accept(token);
    v.tokens.push_back(token);
    if (on_token) on_token(i, token);
    if (i == draft.size() || token != draft[i]) break;
  }
  return v;
}

}  // namespace kiln
