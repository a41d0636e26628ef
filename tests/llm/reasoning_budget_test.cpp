// ReasoningBudget's state machine (llama.cpp's reasoning-budget sampler) on made-up token ids,
// and a Sampler that takes the forced tokens whatever the logits say.
#include "llm/reasoning_budget.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "llm/sampler.h"

namespace kiln {
namespace {

// Tokens: 1 2 = "<think>", 3 4 = "</think>", 9 = a message token; others are text.
ReasoningBudgetSpec spec(int32_t budget, std::vector<int32_t> prefill = {}) {
  return {.start = {1, 2}, .ends = {{3, 4}}, .forced = {9, 3, 4}, .budget = budget, .prefill = std::move(prefill)};
}

// Feeds `tokens`, then the forced ones until the budget forces no more; what was forced.
std::vector<int32_t> run_forcing(ReasoningBudget& b, const std::vector<int32_t>& tokens) {
  for (int32_t t : tokens) b.accept(t);
  std::vector<int32_t> forced;
  while (auto f = b.forced_token()) {
    forced.push_back(*f);
    b.accept(*f);
  }
  return forced;
}

TEST(ReasoningBudget, CountsFromTheStartTagThenForcesMessageAndEndTag) {
  ReasoningBudget b(spec(3), nullptr);
  EXPECT_EQ(run_forcing(b, {7, 7}), std::vector<int32_t>{});  // no block yet: no count
  EXPECT_EQ(b.state(), ReasoningBudget::State::Idle);
  EXPECT_EQ(run_forcing(b, {1, 2, 5, 6}), std::vector<int32_t>{});
  EXPECT_EQ(b.state(), ReasoningBudget::State::Counting);
  EXPECT_EQ(run_forcing(b, {8}), (std::vector<int32_t>{9, 3, 4}));  // the third token spends it
  EXPECT_EQ(b.state(), ReasoningBudget::State::Done);
  EXPECT_EQ(run_forcing(b, {5, 6, 7, 8}), std::vector<int32_t>{});  // after the block: free
}

TEST(ReasoningBudget, ZeroForcesAtOnceAndANaturalEndStopsTheCount) {
  ReasoningBudget zero(spec(0), nullptr);
  EXPECT_EQ(run_forcing(zero, {1, 2}), (std::vector<int32_t>{9, 3, 4}));
  ReasoningBudget natural(spec(3), nullptr);
  EXPECT_EQ(run_forcing(natural, {1, 2, 5, 3, 4, 6, 6, 6}), std::vector<int32_t>{});
  EXPECT_EQ(natural.state(), ReasoningBudget::State::Done);
  // A second block gets a fresh budget.
  EXPECT_EQ(run_forcing(natural, {1, 2, 5, 5, 5}), (std::vector<int32_t>{9, 3, 4}));
}

TEST(ReasoningBudget, ThePrefillOpensTheBlockAndResetReplaysIt) {
  ReasoningBudget b(spec(2, {7, 1, 2}), nullptr);
  EXPECT_EQ(b.state(), ReasoningBudget::State::Counting);
  EXPECT_EQ(run_forcing(b, {5, 5}), (std::vector<int32_t>{9, 3, 4}));
  b.reset();
  EXPECT_EQ(b.state(), ReasoningBudget::State::Counting);
  // A prefill that opens and closes the block ("<think></think>") with budget 0: as in llama.cpp's
  // sampler (common/reasoning-budget.cpp), forcing starts at the start tag and counts the tokens
  // accepted, whatever they are, so the two of the end tag leave the last forced token to come.
  ReasoningBudget closed(spec(0, {1, 2, 3, 4}), nullptr);
  EXPECT_EQ(closed.state(), ReasoningBudget::State::Forcing);
  EXPECT_EQ(run_forcing(closed, {}), std::vector<int32_t>{4});
  EXPECT_EQ(closed.state(), ReasoningBudget::State::Done);
}

TEST(ReasoningBudget, WaitsForAWholeUtf8Character) {
  // Token 6 ends inside a character: the budget spent on it waits for the next token.
  ReasoningBudget b(spec(1), [](int32_t t) { return t != 6; });
  EXPECT_EQ(run_forcing(b, {1, 2, 6}), std::vector<int32_t>{});
  EXPECT_EQ(b.state(), ReasoningBudget::State::WaitingUtf8);
  EXPECT_EQ(run_forcing(b, {5}), (std::vector<int32_t>{9, 3, 4}));
  EXPECT_TRUE(ends_utf8_character("a\xC3\xA9"));
  EXPECT_FALSE(ends_utf8_character("a\xC3"));
  EXPECT_FALSE(ends_utf8_character("\xA9"));  // continuation bytes only: llama.cpp's rule
  EXPECT_TRUE(ends_utf8_character(""));
}

TEST(ReasoningBudget, ForceEndActsOnlyOnABlockBeingCounted) {
  ReasoningBudget b(spec(INT32_MAX), [](int32_t t) { return t != 6; });
  EXPECT_FALSE(b.force_end());  // no block yet: nothing to end, and none ended later
  EXPECT_EQ(run_forcing(b, {1, 2, 5, 5}), std::vector<int32_t>{});
  EXPECT_TRUE(b.force_end());
  EXPECT_EQ(run_forcing(b, {}), (std::vector<int32_t>{9, 3, 4}));
  EXPECT_FALSE(b.force_end());  // Done
  // Asked inside a character, it waits for the character's last token.
  EXPECT_EQ(run_forcing(b, {1, 2, 6}), std::vector<int32_t>{});
  EXPECT_TRUE(b.force_end());
  EXPECT_EQ(b.state(), ReasoningBudget::State::WaitingUtf8);
  EXPECT_EQ(run_forcing(b, {5}), (std::vector<int32_t>{9, 3, 4}));
  // A block the model closed itself is not counted any more.
  EXPECT_EQ(run_forcing(b, {1, 2, 5, 3, 4}), std::vector<int32_t>{});
  EXPECT_FALSE(b.force_end());
}

TEST(ReasoningBudget, TheSamplerTakesTheForcedTokens) {
  SamplerParams greedy;
  greedy.temperature = 0.0f;
  auto s = Sampler::create(greedy, 16);
  ASSERT_TRUE(s.ok());
  s->set_reasoning_budget(std::make_unique<ReasoningBudget>(spec(1, {1, 2}), nullptr));
  std::vector<float> logits(16, 0.0f);
  logits[5] = 10.0f;  // greedy picks 5 unless forced
  std::vector<int32_t> out;
  for (int i = 0; i < 6; ++i) {
    const int32_t t = s->sample(logits);
    s->accept(t);
    out.push_back(t);
  }
  EXPECT_EQ(out, (std::vector<int32_t>{5, 9, 3, 4, 5, 5}));
  s->reset_history();  // a new reply: the prefill again
  EXPECT_EQ(s->sample(logits), 5);
}

}  // namespace
}  // namespace kiln
