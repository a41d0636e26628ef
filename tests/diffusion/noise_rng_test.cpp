// Both generators against stable-diffusion.cpp's, bit for bit: seeds 0, 42 and one above 2^32,
// sizes 7 (the torch CPU generator's double path), 37 (a 16-block tail) and 256 (a 64x64 image's
// latent), two consecutive calls after one seed.
#include "diffusion/noise_rng.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <string>

#include "sdcpp_refs.h"

namespace kiln::diffusion {
namespace {

using test::bits_equal;
using test::ref_floats;

class NoiseRngRef : public ::testing::TestWithParam<RngKind> {};

TEST_P(NoiseRngRef, EqualsStableDiffusionCpp) {
  const RngKind kind = GetParam();
  for (uint64_t seed : {uint64_t{0}, uint64_t{42}, uint64_t{1234567890123}}) {
    for (size_t n : {size_t{7}, size_t{37}, size_t{256}}) {
      auto rng = make_noise_rng(kind);
      rng->seed(seed);
      for (int call = 0; call < 2; ++call) {
        std::vector<float> got(n);
        rng->randn(got);
        const std::string key = "randn/" + std::string(rng_kind_name(kind)) + "/" + std::to_string(seed) +
                                "/" + std::to_string(n) + "/" + std::to_string(call);
        EXPECT_TRUE(bits_equal(ref_floats(key), got)) << key;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Kinds, NoiseRngRef, ::testing::Values(RngKind::Cuda, RngKind::Cpu),
                         [](const auto& info) { return std::string(rng_kind_name(info.param)); });

TEST(NoiseRng, ReseedingRestartsTheStream) {
  for (RngKind kind : {RngKind::Cuda, RngKind::Cpu}) {
    auto rng = make_noise_rng(kind);
    std::vector<float> first(20), again(20);
    rng->seed(7);
    rng->randn(first);
    rng->randn(again);
    rng->seed(7);
    rng->randn(again);
    EXPECT_TRUE(test::bits_equal(first, again)) << rng_kind_name(kind);
  }
}

TEST(NoiseRng, ParsesSdCliNames) {
  EXPECT_EQ(parse_rng_kind("cuda"), RngKind::Cuda);
  EXPECT_EQ(parse_rng_kind("cpu"), RngKind::Cpu);
  EXPECT_FALSE(parse_rng_kind("std_default").has_value());
  EXPECT_FALSE(parse_rng_kind("").has_value());
}

}  // namespace
}  // namespace kiln::diffusion
