// Emphasis weighting of a chunk's hidden states and SDXL's size embeddings against
// stable-diffusion.cpp's apply_token_weights and timestep_embedding, bit for bit (sdcpp_oracle.cpp
// makes the same stand-in hidden states).
#include "diffusion/conditioning_math.h"

#include <gtest/gtest.h>

#include <string>

#include "diffusion/clip_prompt.h"
#include "sdcpp_refs.h"

namespace kiln::diffusion {
namespace {

std::vector<float> stand_in_hidden(size_t n) {
  std::vector<float> v(n);
  for (size_t k = 0; k < n; ++k) v[k] = static_cast<float>(static_cast<int>((k * 37) % 101) - 50) / 17.0f;
  return v;
}

TEST(ConditioningMathRef, TokenWeightingEqualsStableDiffusionCpp) {
  const auto tokens =
      tokenize_prompt(ClipTokenizer::instance(), test::ref_text("prompt/3"), ClipTokenizer::kEosId);
  ASSERT_TRUE(tokens.ok());
  ASSERT_EQ(tokens->weights.size(), kClipChunkTokens);
  std::vector<float> hidden = stand_in_hidden(8 * kClipChunkTokens);
  apply_token_weights(hidden, tokens->weights);
  EXPECT_TRUE(test::bits_equal(test::ref_floats("token_weighting/3"), hidden));
}

TEST(ConditioningMath, AllOneWeightsChangeNothing) {
  std::vector<float> hidden = stand_in_hidden(4 * 3);
  const std::vector<float> before = hidden;
  apply_token_weights(hidden, std::vector<float>(3, 1.0f));
  EXPECT_TRUE(test::bits_equal(before, hidden));
}

TEST(ConditioningMathRef, SdxlSizeEmbeddingsEqualStableDiffusionCpp) {
  const std::vector<float> pooled(kSdxlPooledWidth, 0.25f);
  for (const auto& [w, h] : {std::pair{1024, 1024}, std::pair{64, 64}, std::pair{832, 1216}}) {
    const std::vector<float> vec = sdxl_conditioning_vector(pooled, w, h);
    ASSERT_EQ(vec.size(), static_cast<size_t>(kSdxlVectorWidth));
    EXPECT_TRUE(test::bits_equal(pooled, std::span(vec).first(kSdxlPooledWidth)));
    const std::string key = "sdxl_size_embedding/" + std::to_string(w) + "x" + std::to_string(h);
    EXPECT_TRUE(test::bits_equal(test::ref_floats(key), std::span(vec).subspan(kSdxlPooledWidth))) << key;
  }
}

}  // namespace
}  // namespace kiln::diffusion
