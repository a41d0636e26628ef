#include "llm/perplexity.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

namespace kiln {
namespace {

TEST(Perplexity, UniformLogitsGiveTheVocabularySize) {
  const std::vector<float> logits(1000, 0.25f);
  NllAccumulator acc;
  for (int i = 0; i < 10; ++i) acc.add(-log_prob(logits, i));
  EXPECT_NEAR(acc.perplexity(), 1000.0, 1e-9);
  EXPECT_NEAR(acc.perplexity_error(), 0.0, 1e-3);  // all NLLs equal: no spread (up to rounding)
}

TEST(Perplexity, LogProbIsLogSoftmax) {
  const std::vector<float> logits{1.0f, 2.0f, 3.0f};
  const double z = std::exp(1.0) + std::exp(2.0) + std::exp(3.0);
  EXPECT_NEAR(log_prob(logits, 2), 3.0 - std::log(z), 1e-12);
  std::vector<double> all(3);
  log_softmax(logits, all);
  EXPECT_NEAR(all[0], 1.0 - std::log(z), 1e-12);
}

TEST(Perplexity, ErrorFollowsLlamaCppFormula) {
  NllAccumulator acc;
  acc.add(1.0);
  acc.add(3.0);
  // mean 2, E[x^2] 5, var 1, ppl e^2, error e^2 * sqrt(1 / 1)
  EXPECT_NEAR(acc.perplexity(), std::exp(2.0), 1e-12);
  EXPECT_NEAR(acc.perplexity_error(), std::exp(2.0), 1e-12);
}

TEST(KlDivergence, ZeroForIdenticalAndPositiveOtherwise) {
  std::vector<double> a(2), b(2);
  log_softmax(std::vector<float>{0.0f, 0.0f}, a);
  log_softmax(std::vector<float>{std::log(3.0f), 0.0f}, b);  // p = 0.75, 0.25
  EXPECT_NEAR(kl_divergence(a, a), 0.0, 1e-15);
  // KL(0.5,0.5 || 0.75,0.25) = 0.5 ln(0.5/0.75) + 0.5 ln(0.5/0.25)
  EXPECT_NEAR(kl_divergence(a, b), 0.5 * std::log(0.5 / 0.75) + 0.5 * std::log(2.0), 1e-6);
  std::vector<double> c(2);
  log_softmax(std::vector<float>{0.0f, std::log(3.0f)}, c);  // p = 0.25, 0.75
  KlStats s;
  s.add(b, b);
  s.add(b, c);
  EXPECT_EQ(s.tokens, 2);
  EXPECT_EQ(s.same_top, 1);
  EXPECT_NEAR(s.mean(), 0.5 * kl_divergence(b, c), 1e-12);
}

}  // namespace
}  // namespace kiln
