// DecoderPlans: which cached step plans a context finds, and which it drops.
#include "llm/decoder_plans.h"

#include <gtest/gtest.h>

namespace kiln {
namespace {

DecoderGraphSpec spec_of(int64_t n_tokens, int64_t n_kv) {
  DecoderGraphSpec s;
  s.n_tokens = n_tokens;
  s.n_outputs = n_tokens;
  s.n_kv = n_kv;
  return s;
}

TEST(DecoderPlans, FindsOnlyTheSameShapeAtTheSameGenerations) {
  DecoderPlans plans;
  const DecoderPlans::Generations gen{1, 1};
  DecoderPlan& kept = plans.insert(spec_of(1, 256), gen, std::make_unique<DecoderPlan>());
  EXPECT_EQ(plans.find(spec_of(1, 256), gen), &kept);
  EXPECT_EQ(plans.find(spec_of(1, 512), gen), nullptr);  // another n_kv
  EXPECT_EQ(plans.find(spec_of(2, 256), gen), nullptr);  // another batch size
  DecoderGraphSpec one_row = spec_of(1, 256);
  one_row.single_row_order = true;
  EXPECT_EQ(plans.find(one_row, gen), nullptr);
  EXPECT_EQ(plans.size(), 1u);
  // The cache moved: the plan holds its old address and is dropped.
  EXPECT_EQ(plans.find(spec_of(1, 256), {1, 2}), nullptr);
  EXPECT_EQ(plans.size(), 0u);
  plans.insert(spec_of(1, 256), {1, 2}, std::make_unique<DecoderPlan>());
  EXPECT_EQ(plans.find(spec_of(1, 256), {2, 2}), nullptr);  // the weights moved
  EXPECT_EQ(plans.size(), 0u);
}

TEST(DecoderPlans, TheLeastRecentlyUsedLeavesFirst) {
  DecoderPlans plans;
  const DecoderPlans::Generations gen{};
  for (int64_t t = 1; t <= static_cast<int64_t>(DecoderPlans::kMaxEntries); ++t)
    plans.insert(spec_of(t, 256), gen, std::make_unique<DecoderPlan>());
  ASSERT_NE(plans.find(spec_of(1, 256), gen), nullptr);  // 1 is now the most recent; 2 the least
  plans.insert(spec_of(100, 256), gen, std::make_unique<DecoderPlan>());
  EXPECT_EQ(plans.size(), DecoderPlans::kMaxEntries);
  EXPECT_EQ(plans.find(spec_of(2, 256), gen), nullptr);
  EXPECT_NE(plans.find(spec_of(1, 256), gen), nullptr);
  EXPECT_NE(plans.find(spec_of(3, 256), gen), nullptr);
  EXPECT_NE(plans.find(spec_of(100, 256), gen), nullptr);
}

}  // namespace
}  // namespace kiln
