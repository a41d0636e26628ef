// Draft sources on hand-made token histories (what each proposes, when it stays silent, how it
// learns from accepted counts), option parsing and checks, draft-model compatibility, and the
// verification rule: a verified draft gives exactly the tokens and random draws of plain sampling.
#include <gtest/gtest.h>

#include <cmath>

#include "llm/speculative/draft_model.h"
#include "llm/speculative/ngram_cache.h"
#include "llm/speculative/ngram_map.h"
#include "llm/speculative/ngram_mod.h"
#include "llm/speculative/ngram_simple.h"
#include "llm/speculative/options.h"
#include "llm/speculative/speculator.h"
#include "llm/speculative/verify.h"
#include "test_data.h"

namespace kiln {
namespace {

using Tokens = std::vector<int32_t>;

TEST(NgramSimple, DraftsWhatFollowedTheNewestEarlierMatch) {
  // pattern [2, 3] (last token 2 + sampled 3) occurs at 1 and 6; the search from the end finds 6.
  const Tokens h = {1, 2, 3, 4, 5, 1, 2, 3, 4, 5, 1, 2};
  EXPECT_EQ(ngram_simple_draft(2, 3, h, 3), (Tokens{4, 5, 1}));
  // size_m longer than what follows the match: cut at the end of the history.
  EXPECT_EQ(ngram_simple_draft(2, 5, h, 3), (Tokens{4, 5, 1, 2}));
}

TEST(NgramSimple, StaysSilentWithoutAUsableMatch) {
  const Tokens h = {1, 2, 3, 4, 5, 1, 2, 3, 4, 5, 1, 2};
  EXPECT_TRUE(ngram_simple_draft(2, 3, h, 9).empty());                                 // no match
  EXPECT_TRUE(ngram_simple_draft(2, 3, Tokens(h.begin(), h.begin() + 6), 3).empty());  // too short
  // The only match is at position 0, which llama.cpp never takes.
  EXPECT_TRUE(ngram_simple_draft(2, 2, Tokens{7, 8, 0, 0, 0, 0, 0, 0, 0, 7}, 8).empty());
  // A match whose continuation is shorter than size_n drafts nothing: [9, 4] at 5, one token after.
  EXPECT_TRUE(ngram_simple_draft(2, 1, Tokens{1, 1, 1, 1, 1, 9, 4, 6}, 4).empty());
  EXPECT_EQ(ngram_simple_draft(1, 3, Tokens{1, 1, 1, 1, 1, 9, 4, 6}, 9), (Tokens{4, 6}));
}

TEST(NgramMap, KeyOnlyDraftsAndShortensToWhatWasAccepted) {
  NgramMap map(2, 3, /*key_only=*/true, 1);
  const Tokens h = {5, 6, 1, 2, 3, 4, 7, 8, 9, 9, 9, 9, 9, 1};
  map.begin(Tokens(h.begin(), h.begin() + 8));  // the prompt: scanned for keys from its end
  Tokens d;
  map.draft(h, 2, d);  // key [1, 2] at 2 -> [3, 4, 7]
  EXPECT_EQ(d, (Tokens{3, 4, 7}));
  map.accept(1);  // the target took one token: this key drafts one from now on
  d.clear();
  map.draft(h, 2, d);
  EXPECT_EQ(d, (Tokens{3}));
  d.clear();
  map.draft(h, 5, d);  // key [1, 5] was never seen
  EXPECT_TRUE(d.empty());
}

TEST(NgramMap, K4vWaitsForMinHitsAndADominantContinuation) {
  // key [1, 2] followed by [3, 3] twice and [4, 4] once before the newest occurrence.
  const Tokens h = {0, 1, 2, 3, 3, 0, 1, 2, 4, 4, 0, 1, 2, 3, 3, 0, 0, 0, 0, 1};
  NgramMap map(2, 2, /*key_only=*/false, /*min_hits=*/2);
  map.begin(Tokens(h.begin(), h.begin() + 2));
  Tokens d;
  map.draft(h, 2, d);
  EXPECT_TRUE(d.empty()) << "first hit of the key, min_hits 2";
  map.draft(h, 2, d);
  EXPECT_EQ(d, (Tokens{3, 3})) << "2 x [3, 3] against 1 x [4, 4]: dominant";

  const Tokens tie = {0, 1, 2, 3, 3, 0, 1, 2, 4, 4, 0, 0, 0, 0, 1};
  NgramMap even(2, 2, false, 1);
  even.begin(Tokens(tie.begin(), tie.begin() + 2));
  d.clear();
  even.draft(tie, 2, d);
  EXPECT_TRUE(d.empty()) << "one each: no continuation dominates";
}

TEST(NgramMod, ChainsLookupsAndResetsAfterPoorAcceptance) {
  NgramModTable table(2);
  NgramModOptions o{.n_match = 2, .n_max = 4, .n_min = 2};
  NgramModDrafter d(table, o);
  d.begin(Tokens{1, 2, 3, 4, 5, 6});  // (1,2)->3 (2,3)->4 (3,4)->5 (4,5)->6
  EXPECT_EQ(table.get(Tokens{1, 2}.data()), 3);
  EXPECT_EQ(table.get(Tokens{5, 6}.data()), NgramModTable::kEmpty);
  // after [..., 1] + sampled 2: 3, 4, 5, 6, then (5, 6) is unknown.
  EXPECT_EQ(d.draft(Tokens{9, 9, 1}, 2), (Tokens{3, 4, 5, 6}));
  EXPECT_TRUE(d.draft(Tokens{9, 9, 4}, 5).empty()) << "one token < n_min 2";
  for (int i = 0; i < 5; ++i) {
    ASSERT_EQ(d.draft(Tokens{9, 9, 1}, 2).size(), 4u);
    d.accept(0);
  }
  EXPECT_EQ(table.get(Tokens{1, 2}.data()), NgramModTable::kEmpty) << "five poor drafts empty the table";
}

TEST(NgramCache, DraftsTheContinuationTheContextSupports) {
  NgramCacheDrafter c;
  // "1 2 3 4" twice: after ... 1 + sampled 2 the context says 3, then 4, then 1, ...
  const Tokens h = {1, 2, 3, 4, 1, 2, 3, 4, 1};
  const Tokens d = c.draft(h, 2);
  ASSERT_FALSE(d.empty());
  EXPECT_EQ(Tokens(d.begin(), d.begin() + 3), (Tokens{3, 4, 1}));
  EXPECT_LE(d.size(), static_cast<size_t>(NgramCacheDrafter::kDraftMax));
  NgramCacheDrafter fresh;
  EXPECT_TRUE(fresh.draft(Tokens{5, 6, 7}, 8).empty()) << "nothing repeats";
}

TEST(SpeculativeOptions, ParsesLlamaCppTypeNames) {
  auto s = parse_draft_sources("draft-simple,ngram-mod,ngram-simple,ngram-mod");
  ASSERT_TRUE(s.ok()) << s.error().message;
  EXPECT_EQ(*s, (std::vector<DraftSource>{DraftSource::NgramSimple, DraftSource::NgramMod,
                                          DraftSource::DraftSimple}))
      << "llama.cpp's order of preference, no repeats";
  auto none = parse_draft_sources("ngram-simple,none");
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->empty());
  auto bad = parse_draft_sources("ngram-simple,eagle");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message.find("'eagle'"), std::string::npos) << bad.error().message;
  EXPECT_NE(bad.error().message.find("ngram-map-k4v"), std::string::npos) << bad.error().message;
}

TEST(SpeculativeOptions, ChecksRangesNamingTheFlag) {
  SpeculativeOptions o;
  EXPECT_TRUE(o.validate().ok());
  o.draft.p_min = 1.5f;
  EXPECT_NE(o.validate().error().message.find("--spec-draft-p-min"), std::string::npos);
  o = {};
  o.draft.n_min = 5;  // above n_max 3
  EXPECT_NE(o.validate().error().message.find("--spec-draft-n-min"), std::string::npos);
  o = {};
  o.ngram_map_k4v.size_n = 0;
  EXPECT_NE(o.validate().error().message.find("--spec-ngram-map-k4v-size-n"), std::string::npos);
  o = {};
  o.sources = {DraftSource::NgramSimple, DraftSource::NgramCache, DraftSource::DraftSimple};
  o.draft.n_max = 16;
  EXPECT_EQ(o.n_max(), 48);  // ngram-simple's size_m
}

TEST(SpeculativeOptions, BudgetLeavesRoomAsLlamaServer) {
  EXPECT_EQ(n_draft_budget(100, 50, -1, 7), 48);  // n_ctx - cached - 2
  EXPECT_EQ(n_draft_budget(100, 50, 10, 7), 2);   // n_predict - generated - 1
  EXPECT_EQ(n_draft_budget(100, 50, 8, 8), -1);
  EXPECT_EQ(n_draft_budget(100, 99, -1, 0), -1);
}

std::shared_ptr<const Model> fixture(const std::string& stem) {
  auto m = Model::load(test_data::path("models/" + stem + ".gguf"));
  EXPECT_TRUE(m.ok()) << m.error().message;
  return m.ok() ? *m : nullptr;
}

TEST(DraftModelCompatibility, FollowsLlamaCppsRule) {
  const auto llama_f32 = fixture("llama-spm-e128-f32");
  const auto llama_q4 = fixture("llama-spm-e256-Q4_0");
  const auto qwen2 = fixture("qwen2-e64-Q8_0");
  const auto qwen3 = fixture("qwen3-e64-Q8_0");
  ASSERT_TRUE(llama_f32 && llama_q4 && qwen2 && qwen3);
  EXPECT_TRUE(check_draft_compatible(*llama_q4, *llama_f32).ok())
      << "same vocabulary, other shapes and types";
  EXPECT_TRUE(check_draft_compatible(*qwen2, *qwen3).ok());
  const Status st = check_draft_compatible(*llama_q4, *qwen2);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.error().message.find("vocabulary types differ"), std::string::npos) << st.error().message;
}

// A sampler over a small vocabulary and logits that favour a given token per row.
std::vector<float> favour(int32_t token, int32_t n_vocab = 8) {
  std::vector<float> l(static_cast<size_t>(n_vocab), 0.0f);
  l[static_cast<size_t>(token)] = 5.0f;
  return l;
}

TEST(VerifyDraft, AcceptsWhileTheTargetAgrees) {
  SamplerParams p;
  p.temperature = 0.0f;
  auto s = Sampler::create(p, 8);
  ASSERT_TRUE(s.ok());
  const std::vector<std::vector<float>> rows = {favour(3), favour(5), favour(6), favour(1)};
  const Verdict v =
      verify_draft(*s, Tokens{3, 5, 2}, [&](size_t i) { return std::span<const float>(rows[i]); });
  EXPECT_EQ(v.tokens, (Tokens{3, 5, 6}));
  EXPECT_EQ(v.n_accepted(), 2);
  EXPECT_EQ(v.first_rejected_pos(10), 13);  // sampled at 10, drafts 11 and 12 kept, 13 dropped
  const Verdict all =
      verify_draft(*s, Tokens{3, 5, 6}, [&](size_t i) { return std::span<const float>(rows[i]); });
  EXPECT_EQ(all.tokens, (Tokens{3, 5, 6, 1}));
}

TEST(VerifyDraft, SamplesExactlyAsPlainDecoding) {
  // Same seed: sampling rows one by one, and verifying a draft of those very tokens, draw the same
  // numbers; a wrong draft token changes nothing before it.
  const SamplerParams p{.seed = 42,
                        .temperature = 1.5f,
                        .top_k = 0,
                        .top_p = 1.0f,
                        .min_p = 0.0f,
                        .repeat_penalty = 1.3f,
                        .logit_bias = {},
                        .min_keep = 1};
  std::vector<std::vector<float>> rows;
  for (int i = 0; i < 12; ++i) {
    std::vector<float> l(8);
    for (int j = 0; j < 8; ++j) l[static_cast<size_t>(j)] = std::sin(static_cast<float>(i * 8 + j));
    rows.push_back(l);
  }
  auto plain = Sampler::create(p, 8);
  ASSERT_TRUE(plain.ok());
  Tokens expected;
  for (const auto& r : rows) {
    expected.push_back(plain->sample(r));
    plain->accept(expected.back());
  }
  auto spec = Sampler::create(p, 8);
  ASSERT_TRUE(spec.ok());
  Tokens draft(expected.begin(), expected.end() - 1);
  draft[6] = (draft[6] + 1) % 8;  // rejected at row 6
  const Verdict v = verify_draft(*spec, draft, [&](size_t i) { return std::span<const float>(rows[i]); });
  EXPECT_EQ(v.tokens, Tokens(expected.begin(), expected.begin() + 7));
  // The rest, sampled after the verification, continue the same stream.
  Tokens rest;
  for (size_t i = 7; i < rows.size(); ++i) {
    rest.push_back(spec->sample(rows[i]));
    spec->accept(rest.back());
  }
  EXPECT_EQ(rest, Tokens(expected.begin() + 7, expected.end()));
}

}  // namespace
}  // namespace kiln
