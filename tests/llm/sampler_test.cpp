#include "llm/sampler.h"

#include <gtest/gtest.h>

#include <cmath>
#include <map>

namespace kiln {
namespace {

std::vector<Candidate> make(std::initializer_list<float> logits) {
  std::vector<Candidate> c;
  int32_t id = 0;
  for (float l : logits) c.push_back({id++, l, 0.0f});
  return c;
}

std::vector<int32_t> ids(const std::vector<Candidate>& c) {
  std::vector<int32_t> out;
  for (const auto& x : c) out.push_back(x.id);
  return out;
}

TEST(Sampling, SoftmaxSortsAndNormalises) {
  auto c = make({1.0f, 3.0f, 2.0f});
  sampling::softmax(c);
  EXPECT_EQ(ids(c), (std::vector<int32_t>{1, 2, 0}));
  const double z = std::exp(0.0) + std::exp(-1.0) + std::exp(-2.0);
  EXPECT_NEAR(c[0].p, 1.0 / z, 1e-6);
  EXPECT_NEAR(c[2].p, std::exp(-2.0) / z, 1e-6);
}

TEST(Sampling, TopKKeepsTheKLargest) {
  auto c = make({0.5f, 4.0f, 1.0f, 3.0f});
  sampling::top_k(c, 2);
  EXPECT_EQ(ids(c), (std::vector<int32_t>{1, 3}));
  auto all = make({0.5f, 4.0f});
  sampling::top_k(all, 0);
  EXPECT_EQ(all.size(), 2u);
}

TEST(Sampling, TopPKeepsSmallestPrefixReachingP) {
  // probabilities 0.5, 0.3, 0.2 (logits are their logs)
  auto c = make({std::log(0.5f), std::log(0.3f), std::log(0.2f)});
  sampling::top_p(c, 0.7f, 1);
  EXPECT_EQ(ids(c), (std::vector<int32_t>{0, 1}));
  auto d = make({std::log(0.5f), std::log(0.3f), std::log(0.2f)});
  sampling::top_p(d, 0.5f, 1);
  EXPECT_EQ(ids(d), (std::vector<int32_t>{0}));
  auto e = make({std::log(0.5f), std::log(0.3f), std::log(0.2f)});
  sampling::top_p(e, 0.1f, 3);  // min_keep wins
  EXPECT_EQ(e.size(), 3u);
}

TEST(Sampling, MinPIsRelativeToTheBest) {
  auto c = make({std::log(0.6f), std::log(0.3f), std::log(0.05f), std::log(0.05f)});
  sampling::min_p(c, 0.1f, 1);  // threshold 0.06
  EXPECT_EQ(ids(c), (std::vector<int32_t>{0, 1}));
}

TEST(Sampling, TypicalPrefersTokensNearTheEntropy) {
  // p = 0.4, 0.15 x 4: entropy 1.505 nats; -log 0.15 = 1.897 is closer to it than -log 0.4 = 0.916,
  // so the four small tokens come first and reach mass 0.5 before the large one is taken.
  auto c = make({std::log(0.4f), std::log(0.15f), std::log(0.15f), std::log(0.15f), std::log(0.15f)});
  sampling::typical(c, 0.5f, 1);
  EXPECT_EQ(ids(c), (std::vector<int32_t>{1, 2, 3, 4}));
}

TEST(Sampler, GreedyAtZeroTemperature) {
  SamplerParams p;
  p.temperature = 0.0f;
  auto s = Sampler::create(p, 5);
  ASSERT_TRUE(s.ok());
  std::vector<float> logits{0.1f, 0.2f, 3.0f, -1.0f, 2.9f};
  EXPECT_EQ(s->sample(logits), 2);
}

TEST(Sampler, SameSeedSameTokensDifferentSeedDiffers) {
  SamplerParams p;
  p.temperature = 1.5f;
  p.top_k = 0;
  p.top_p = 1.0f;
  p.min_p = 0.0f;
  std::vector<float> logits(50);
  for (size_t i = 0; i < logits.size(); ++i) logits[i] = static_cast<float>(i % 7) * 0.3f;
  auto run = [&](uint64_t seed) {
    p.seed = seed;
    auto s = Sampler::create(p, 50).value();
    std::vector<int32_t> out;
    for (int i = 0; i < 32; ++i) out.push_back(s.sample(logits));
    return out;
  };
  EXPECT_EQ(run(42), run(42));
  EXPECT_NE(run(42), run(43));
}

TEST(Sampler, DrawsFollowTheDistribution) {
  SamplerParams p;
  p.temperature = 1.0f;
  p.top_k = 0;
  p.top_p = 1.0f;
  p.min_p = 0.0f;
  p.seed = 7;
  auto s = Sampler::create(p, 3).value();
  std::vector<float> logits{std::log(0.6f), std::log(0.3f), std::log(0.1f)};
  std::map<int32_t, int> hits;
  const int n = 20000;
  for (int i = 0; i < n; ++i) ++hits[s.sample(logits)];
  EXPECT_NEAR(hits[0] / double(n), 0.6, 0.02);
  EXPECT_NEAR(hits[1] / double(n), 0.3, 0.02);
  EXPECT_NEAR(hits[2] / double(n), 0.1, 0.02);
}

TEST(Sampler, PenaltiesFollowLlamaCpp) {
  SamplerParams p;
  p.temperature = 0.0f;
  p.repeat_penalty = 2.0f;
  p.frequency_penalty = 0.5f;
  p.presence_penalty = 0.25f;
  auto s = Sampler::create(p, 3).value();
  s.accept(0);
  s.accept(0);
  s.accept(1);
  std::vector<float> logits{4.0f, -1.0f, 1.9f};
  // token 0: 4/2 - 2*0.5 - 0.25 = 0.75; token 1: -1*2 - 0.5 - 0.25 = -2.75; token 2: 1.9
  EXPECT_EQ(s.sample(logits), 2);
  const auto& c = s.last_candidates();
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0].id, 2);
}

TEST(Sampler, PenaltyWindowForgetsOldTokens) {
  SamplerParams p;
  p.temperature = 0.0f;
  p.repeat_penalty = 100.0f;
  p.penalty_last_n = 2;
  auto s = Sampler::create(p, 3).value();
  s.accept(0);
  s.accept(1);
  s.accept(2);  // token 0 leaves the window
  std::vector<float> logits{1.0f, 1.5f, 1.5f};
  EXPECT_EQ(s.sample(logits), 0);
}

TEST(Sampler, LogitBiasCanBanAndForce) {
  SamplerParams p;
  p.temperature = 0.0f;
  p.logit_bias = {{2, -INFINITY}, {0, 10.0f}};
  auto s = Sampler::create(p, 3).value();
  std::vector<float> logits{0.0f, 5.0f, 9.0f};
  EXPECT_EQ(s.sample(logits), 0);
}

TEST(Sampler, RejectsBadParameters) {
  SamplerParams p;
  p.logit_bias = {{3, 1.0f}};
  auto bad = Sampler::create(p, 3);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message.find("logit_bias token id 3"), std::string::npos);
  SamplerParams q;
  q.min_p = 1.5f;
  EXPECT_FALSE(Sampler::create(q, 3).ok());
  EXPECT_FALSE(Sampler::create(SamplerParams{}, 0).ok());
}

}  // namespace
}  // namespace kiln
