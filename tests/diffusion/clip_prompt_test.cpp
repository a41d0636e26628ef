// Prompt emphasis and CLIP tokens against stable-diffusion.cpp, exactly (every piece's text and
// weight bits, every id and weight bit): nested and explicit weights, escapes, unbalanced and stray
// brackets, BREAK (plain, in brackets, inside words), contractions, special tokens, whitespace,
// non-ASCII bytes, a prompt of three chunks; both pad ids (SD 1.x/XL and SD 2.x).
#include "diffusion/clip_prompt.h"

#include <gtest/gtest.h>

#include <string>

#include "diffusion/prompt_attention.h"
#include "sdcpp_refs.h"

namespace kiln::diffusion {
namespace {

using test::ref_floats;
using test::ref_keys;
using test::ref_text;
using test::ref_words;

size_t prompt_count() { return ref_keys("prompt/").size(); }

TEST(PromptAttentionRef, EveryPromptEqualsStableDiffusionCpp) {
  ASSERT_GE(prompt_count(), 15u);
  for (size_t i = 0; i < prompt_count(); ++i) {
    const std::string id = std::to_string(i);
    const std::string prompt = ref_text("prompt/" + id);
    const auto pieces = parse_prompt_attention(prompt);
    ASSERT_TRUE(pieces.ok()) << prompt << ": " << pieces.error().message;
    const std::vector<float> expected_weights = ref_floats("attention_weights/" + id);
    ASSERT_EQ(pieces->size(), expected_weights.size()) << prompt;
    std::vector<float> weights;
    for (size_t k = 0; k < pieces->size(); ++k) {
      EXPECT_EQ((*pieces)[k].text, ref_text("attention/" + id + "/" + std::to_string(k)))
          << prompt << " piece " << k;
      weights.push_back((*pieces)[k].weight);
    }
    EXPECT_TRUE(test::bits_equal(expected_weights, weights)) << prompt;
  }
}

TEST(ClipPromptRef, IdsAndWeightsEqualStableDiffusionCpp) {
  const ClipTokenizer& tokenizer = ClipTokenizer::instance();
  for (size_t i = 0; i < prompt_count(); ++i) {
    const std::string prompt = ref_text("prompt/" + std::to_string(i));
    for (int32_t pad_id : {ClipTokenizer::kEosId, 0}) {
      const std::string key = std::to_string(i) + "/" + std::to_string(pad_id);
      const auto tokens = tokenize_prompt(tokenizer, prompt, pad_id);
      ASSERT_TRUE(tokens.ok()) << prompt;
      std::vector<uint32_t> ids(tokens->ids.begin(), tokens->ids.end());
      EXPECT_EQ(ids, ref_words("tokens/" + key)) << prompt;
      EXPECT_TRUE(test::bits_equal(ref_floats("token_weights/" + key), tokens->weights)) << prompt;
    }
  }
}

TEST(ClipPrompt, LongPromptsAreWholeChunks) {
  const auto tokens =
      tokenize_prompt(ClipTokenizer::instance(), std::string(200, 'x') + " " + std::string(90, '7'),
                      clip_pad_id(ModelFamily::Sd1));
  ASSERT_TRUE(tokens.ok());
  EXPECT_EQ(tokens->ids.size() % kClipChunkTokens, 0u);
  EXPECT_EQ(tokens->ids.size(), tokens->weights.size());
  EXPECT_EQ(tokens->ids[kClipChunkTokens], ClipTokenizer::kBosId);
}

TEST(ClipPrompt, PadIdPerFamily) {
  EXPECT_EQ(clip_pad_id(ModelFamily::Sd1), ClipTokenizer::kEosId);
  EXPECT_EQ(clip_pad_id(ModelFamily::Sdxl), ClipTokenizer::kEosId);
  EXPECT_EQ(clip_pad_id(ModelFamily::Sd2), 0);
}

TEST(PromptAttention, RefusesWeightsThatAreNoNumber) {
  EXPECT_FALSE(parse_prompt_attention("(cat:.)").ok());
  EXPECT_FALSE(parse_prompt_attention("(cat:+.)").ok());
  EXPECT_FALSE(parse_prompt_attention("(cat:1" + std::string(60, '0') + ")").ok());
  EXPECT_TRUE(parse_prompt_attention("(cat:.5)").ok());
}

}  // namespace
}  // namespace kiln::diffusion
