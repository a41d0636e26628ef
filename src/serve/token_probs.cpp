#include "serve/token_probs.h"

#include <algorithm>
#include <cmath>

#include "core/check.h"

namespace kiln::serve {

PositionLogprobs position_logprobs(std::span<const float> logits, int32_t token, int32_t n_top) {
  KILN_ASSERT(!logits.empty() && token >= 0 && static_cast<size_t>(token) < logits.size(),
              "position_logprobs: token outside the logits");
  const float max = *std::max_element(logits.begin(), logits.end());
  double sum = 0.0;
  for (float x : logits) sum += std::exp(static_cast<double>(x) - max);
  const double log_norm = static_cast<double>(max) + std::log(sum);
  auto logprob = [&](int32_t id) { return static_cast<float>(logits[static_cast<size_t>(id)] - log_norm); };

  PositionLogprobs out;
  out.chosen = logprob(token);
  const size_t k = std::min(static_cast<size_t>(std::max(n_top, 0)), logits.size());
  if (k == 0) return out;
  std::vector<int32_t> ids(logits.size());
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int32_t>(i);
  auto before = [&](int32_t a, int32_t b) {
    const float la = logits[static_cast<size_t>(a)], lb = logits[static_cast<size_t>(b)];
    return la > lb || (la == lb && a < b);
  };
  std::partial_sort(ids.begin(), ids.begin() + static_cast<ptrdiff_t>(k), ids.end(), before);
  out.top.reserve(k);
  for (size_t i = 0; i < k; ++i) out.top.push_back({ids[i], logprob(ids[i])});
  return out;
}

}  // namespace kiln::serve
