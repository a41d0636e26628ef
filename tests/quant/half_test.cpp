// F16/BF16 conversions: against the F16C instructions themselves (when the CPU has them) and
// against known bit patterns.
#include "core/half.h"

#include <gtest/gtest.h>
#include <immintrin.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "ops/quant/quant.h"

namespace kiln {
namespace {

bool cpu_has_f16c() { return __builtin_cpu_supports("f16c"); }

__attribute__((target("f16c"))) uint16_t hw_f32_to_f16(float f) { return _cvtss_sh(f, 0); }
__attribute__((target("f16c"))) float hw_f16_to_f32(uint16_t h) { return _cvtsh_ss(h); }

TEST(Half, KnownValues) {
  EXPECT_EQ(f32_to_f16(1.0f), 0x3c00);
  EXPECT_EQ(f32_to_f16(-2.0f), 0xc000);
  EXPECT_EQ(f32_to_f16(65504.0f), 0x7bff);
  EXPECT_EQ(f32_to_f16(65520.0f), 0x7c00);    // rounds to +Inf
  EXPECT_EQ(f32_to_f16(65519.996f), 0x7bff);  // just below the tie
  EXPECT_EQ(f32_to_f16(0x1.0p-24f), 0x0001);  // smallest subnormal
  EXPECT_EQ(f32_to_f16(0x1.0p-25f), 0x0000);  // tie to even (0)
  EXPECT_EQ(f32_to_f16(0x1.8p-24f), 0x0002);  // 1.5 ulp: tie to even (2)
  EXPECT_EQ(f32_to_f16(-0.0f), 0x8000);
  EXPECT_EQ(f32_to_f16(std::numeric_limits<float>::infinity()), 0x7c00);
  EXPECT_EQ(f32_to_f16(1.0f + 0x1.0p-11f), 0x3c00);  // tie between 1 and 1+2^-10: even
  EXPECT_EQ(f32_to_f16(1.0f + 0x1.8p-10f), 0x3c02);  // tie: even mantissa 2
  EXPECT_EQ(f16_to_f32(0x3555), std::bit_cast<float>(0x3eaaa000u));
  EXPECT_EQ(f16_to_f32(0x0001), 0x1.0p-24f);
  EXPECT_EQ(f16_to_f32(0x7c00), std::numeric_limits<float>::infinity());
  // NaN keeps sign and payload, quieted.
  EXPECT_EQ(f32_to_f16(std::bit_cast<float>(0xffa00000u)), 0xfe00 | (0x200000u >> 13));
  EXPECT_EQ(std::bit_cast<uint32_t>(f16_to_f32(0x7d01)), 0x7fc00000u | (0x101u << 13));
}

TEST(Half, F16ToF32MatchesF16cExhaustively) {
  if (!cpu_has_f16c()) GTEST_SKIP() << "CPU without F16C: covered by KnownValues only";
  for (uint32_t h = 0; h <= 0xffff; ++h) {
    const float a = f16_to_f32(static_cast<uint16_t>(h));
    const float b = hw_f16_to_f32(static_cast<uint16_t>(h));
    ASSERT_EQ(std::bit_cast<uint32_t>(a), std::bit_cast<uint32_t>(b)) << std::hex << h;
  }
}

TEST(Half, F32ToF16MatchesF16cOnSampledBitPatterns) {
  if (!cpu_has_f16c()) GTEST_SKIP() << "CPU without F16C: covered by KnownValues only";
  // Every 509th pattern (all exponents and sign, varied mantissas), plus every pattern around the
  // F16 normal/subnormal/overflow boundaries and the rounding ties of one binade.
  auto check = [](uint32_t u) {
    const float f = std::bit_cast<float>(u);
    ASSERT_EQ(f32_to_f16(f), hw_f32_to_f16(f)) << std::hex << u;
  };
  for (uint64_t u = 0; u <= 0xffffffffull; u += 509) check(static_cast<uint32_t>(u));
  for (uint32_t base : {0x33000000u, 0x38800000u, 0x477fe000u, 0x3f800000u}) {
    for (uint32_t d = 0; d < (1u << 16); ++d) {
      check(base + d);
      check((base + d) | 0x80000000u);
    }
  }
}

TEST(Half, Bf16RoundsToNearestEvenAndQuietsNan) {
  EXPECT_EQ(f32_to_bf16(1.0f), 0x3f80);
  EXPECT_EQ(f32_to_bf16(std::bit_cast<float>(0x3f808000u)), 0x3f80);  // tie, even stays
  EXPECT_EQ(f32_to_bf16(std::bit_cast<float>(0x3f818000u)), 0x3f82);  // tie, odd rounds up
  EXPECT_EQ(f32_to_bf16(std::bit_cast<float>(0x3f808001u)), 0x3f81);  // above the tie
  EXPECT_EQ(f32_to_bf16(std::bit_cast<float>(0x7f7fffffu)), 0x7f80);  // FLT_MAX rounds to Inf
  EXPECT_EQ(f32_to_bf16(std::bit_cast<float>(0x7f800001u)), 0x7fc0);  // sNaN -> quiet
  EXPECT_EQ(f32_to_bf16(std::bit_cast<float>(0xffc12345u)), 0xffc1);
  for (uint32_t h = 0; h <= 0xffff; ++h) {
    // bf16 -> f32 -> bf16 is the identity except that NaNs come back quiet.
    const uint16_t back = f32_to_bf16(bf16_to_f32(static_cast<uint16_t>(h)));
    const bool nan = (h & 0x7f80) == 0x7f80 && (h & 0x7f);
    ASSERT_EQ(back, nan ? (h | 0x40) : h) << std::hex << h;
  }
}

// The F16 type's row conversions (quant_traits: F16C rows on AVX2 CPUs) give the scalar rows'
// bits, over lengths with tails and values that round to subnormals, overflow, tie or are NaN.
TEST(Half, F16TraitRowConversionsMatchTheScalarRows) {
  std::vector<float> x = {0.0f, -0.0f,    1e-8f,         -3e-6f,       65504.0f,           65520.0f,
                          1e6f, INFINITY, -INFINITY,     NAN,          1.0f + 1.0f / 2048, 1.0f + 3.0f / 2048,
                          0.1f, -2.75f,   5.9604645e-8f, 2.9802322e-8f};
  std::mt19937 rng(4);
  std::uniform_real_distribution<float> dist(-70000.0f, 70000.0f);
  while (x.size() < 43) x.push_back(dist(rng));
  const QuantTraits* f16 = quant_traits(DType::F16);
  for (int64_t n : {int64_t{1}, int64_t{8}, int64_t{15}, static_cast<int64_t>(x.size())}) {
    std::vector<uint16_t> got(static_cast<size_t>(n)), want(got.size());
    f16->from_float(x.data(), got.data(), n);
    f32_to_f16_row(x.data(), want.data(), n);
    EXPECT_EQ(got, want) << "n " << n;
    std::vector<float> back(got.size()), back_want(got.size());
    f16->to_float(got.data(), back.data(), n);
    f16_to_f32_row(got.data(), back_want.data(), n);
    for (size_t i = 0; i < back.size(); ++i)
      EXPECT_EQ(std::bit_cast<uint32_t>(back[i]), std::bit_cast<uint32_t>(back_want[i]))
          << "n " << n << " i " << i;
  }
}

TEST(Half, RowHelpers) {
  const float src[5] = {0.5f, -1.25f, 3.0e-6f, 70000.0f, -0.0f};
  uint16_t h[5];
  float back[5];
  f32_to_f16_row(src, h, 5);
  f16_to_f32_row(h, back, 5);
  for (int i = 0; i < 5; ++i) EXPECT_EQ(back[i], f16_to_f32(f32_to_f16(src[i])));
  EXPECT_EQ(back[3], std::numeric_limits<float>::infinity());
  f32_to_bf16_row(src, h, 5);
  bf16_to_f32_row(h, back, 5);
  for (int i = 0; i < 5; ++i) EXPECT_EQ(back[i], bf16_to_f32(f32_to_bf16(src[i])));
}

}  // namespace
}  // namespace kiln
