// img2img_sigmas: stable-diffusion.cpp's cut of the schedule by strength (its default, t_enc by
// truncation), at the edges and in between. Written by hand from its source, not recorded.
#include "diffusion/img2img_sigmas.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

namespace kiln::diffusion {
namespace {

std::vector<float> ramp(int steps) {
  std::vector<float> s;
  for (int i = steps; i >= 1; --i) s.push_back(static_cast<float>(i));
  s.push_back(0.f);
  return s;
}

TEST(Img2imgSigmas, KeepsTheLastTruncatedStrengthShareOfSteps) {
  const std::vector<float> twenty = ramp(20);
  const auto three_quarters = img2img_sigmas(twenty, 0.75f);  // t_enc 15: from index 4, 16 steps
  ASSERT_TRUE(three_quarters.ok());
  EXPECT_EQ(*three_quarters, std::vector<float>(twenty.begin() + 4, twenty.end()));
  const auto third = img2img_sigmas(ramp(4), 0.33f);  // t_enc = (size_t)1.32 = 1: 2 steps
  ASSERT_TRUE(third.ok());
  EXPECT_EQ(*third, (std::vector<float>{2.f, 1.f, 0.f}));
}

TEST(Img2imgSigmas, Edges) {
  const std::vector<float> four = ramp(4);
  EXPECT_EQ(*img2img_sigmas(four, 1.f), four);                            // strength 1: all
  EXPECT_EQ(*img2img_sigmas(four, 0.f), (std::vector<float>{1.f, 0.f}));  // t_enc 0: one step
  EXPECT_EQ(*img2img_sigmas(four, 0.9999f), std::vector<float>(four.begin(), four.end()));  // t_enc 3
  EXPECT_FALSE(img2img_sigmas(four, -0.1f).ok());
  EXPECT_FALSE(img2img_sigmas(four, 1.5f).ok());
  EXPECT_FALSE(img2img_sigmas(four, std::nanf("")).ok());
  EXPECT_FALSE(img2img_sigmas(std::vector<float>{0.f}, 0.5f).ok());
}

}  // namespace
}  // namespace kiln::diffusion
