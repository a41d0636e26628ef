// Dot products, activation quantizers and round trips of every format, against double-precision
// references with tolerances derived from the formats.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstddef>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "core/half.h"
#include "ops/quant/kernels.h"
#include "ops/quant/quant.h"

namespace kiln {
namespace {

constexpr double kEps = 0x1.0p-24;  // F32 unit roundoff

const DType kWeightTypes[] = {DType::F32,  DType::F16,  DType::BF16, DType::Q4_0,   DType::Q4_1,
                              DType::Q5_0, DType::Q5_1, DType::Q8_0, DType::IQ4_NL, DType::Q2_K,
                              DType::Q3_K, DType::Q4_K, DType::Q5_K, DType::Q6_K,   DType::IQ4_XS};

std::vector<float> random_values(int64_t n, uint32_t seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, scale);
  std::vector<float> v(static_cast<size_t>(n));
  for (auto& x : v) x = dist(rng);
  return v;
}

std::vector<float> dequantize(DType t, const void* q, int64_t n) {
  std::vector<float> y(static_cast<size_t>(n));
  quant_traits(t)->to_float(q, y.data(), n);
  return y;
}

// Bound on |vec_dot - exact dot of the dequantized values|: float accumulation over the terms
// (gamma_n), plus, for Q8_1 activations, the F16 rounding of the stored s = d * sum(qs) that the
// Q4_1/Q5_1 kernels use in place of the exact block sum.
double dot_tolerance(DType vec_dot_type, int64_t n, const std::vector<float>& w, const std::vector<float>& a,
                     const void* wq, const void* aq, DType wt) {
  double abs_sum = 0;
  for (size_t i = 0; i < w.size(); ++i) abs_sum += std::fabs(static_cast<double>(w[i]) * a[i]);
  double tol = (static_cast<double>(n) + 8) * kEps * abs_sum + 1e-30;
  if (vec_dot_type == DType::Q8_1) {
    const auto* ab = static_cast<const quant::BlockQ8_1*>(aq);
    for (int64_t ib = 0; ib < n / 32; ++ib) {
      const uint16_t m_bits = wt == DType::Q4_1 ? static_cast<const quant::BlockQ4_1*>(wq)[ib].m
                                                : static_cast<const quant::BlockQ5_1*>(wq)[ib].m;
      tol += std::fabs(f16_to_f32(m_bits) * f16_to_f32(ab[ib].s)) * 0x1.0p-11;
    }
  }
  return tol;
}

TEST(QuantTraits, BlockSizesMatchDtypeTable) {
  EXPECT_EQ(sizeof(quant::BlockQ4_0), type_size(DType::Q4_0));
  EXPECT_EQ(sizeof(quant::BlockQ4_1), type_size(DType::Q4_1));
  EXPECT_EQ(sizeof(quant::BlockQ5_0), type_size(DType::Q5_0));
  EXPECT_EQ(sizeof(quant::BlockQ5_1), type_size(DType::Q5_1));
  EXPECT_EQ(sizeof(quant::BlockQ8_0), type_size(DType::Q8_0));
  EXPECT_EQ(sizeof(quant::BlockQ8_1), type_size(DType::Q8_1));
  EXPECT_EQ(sizeof(quant::BlockQ2_K), type_size(DType::Q2_K));
  EXPECT_EQ(sizeof(quant::BlockQ3_K), type_size(DType::Q3_K));
  EXPECT_EQ(sizeof(quant::BlockQ4_K), type_size(DType::Q4_K));
  EXPECT_EQ(sizeof(quant::BlockQ5_K), type_size(DType::Q5_K));
  EXPECT_EQ(sizeof(quant::BlockQ6_K), type_size(DType::Q6_K));
  EXPECT_EQ(sizeof(quant::BlockQ8_K), type_size(DType::Q8_K));
  EXPECT_EQ(sizeof(quant::BlockIQ4NL), type_size(DType::IQ4_NL));
  EXPECT_EQ(sizeof(quant::BlockIQ4XS), type_size(DType::IQ4_XS));
}

TEST(QuantTraits, TableCoversTheFormats) {
  for (DType t : kWeightTypes) {
    const QuantTraits* tr = quant_traits(t);
    ASSERT_NE(tr, nullptr) << dtype_name(t);
    EXPECT_EQ(tr->type, t);
    EXPECT_TRUE(tr->to_float && tr->from_float && tr->act_from_float && tr->vec_dot && tr->vec_dot_ref);
    EXPECT_EQ(tr->act_from_float, quant_traits(tr->vec_dot_type)->from_float);
    EXPECT_TRUE(quantize_supported(t)) << dtype_name(t);
  }
  EXPECT_EQ(quant_traits(DType::Q4_0)->vec_dot_type, DType::Q8_0);
  EXPECT_EQ(quant_traits(DType::Q5_1)->vec_dot_type, DType::Q8_1);
  EXPECT_EQ(quant_traits(DType::IQ4_NL)->vec_dot_type, DType::Q8_0);
  EXPECT_EQ(quant_traits(DType::Q3_K)->vec_dot_type, DType::Q8_K);
  EXPECT_EQ(quant_traits(DType::IQ4_XS)->vec_dot_type, DType::Q8_K);
  EXPECT_EQ(quant_traits(DType::BF16)->vec_dot_type, DType::BF16);
  EXPECT_EQ(quant_traits(DType::IQ2_XXS), nullptr);
  EXPECT_EQ(quant_traits(DType::I32), nullptr);
  EXPECT_FALSE(quantize_supported(DType::Q8_K));
  EXPECT_FALSE(quantize_supported(DType::Q8_1));
  EXPECT_FALSE(quantize_supported(DType::IQ2_XXS));
}

// Every (weight, activation) pair: scalar reference and the selected kernel against the exact dot
// of the dequantized operands.
TEST(VecDot, EveryPairAgreesWithDoubleDotOfDequantizedValues) {
  uint32_t seed = 1;
  for (DType t : kWeightTypes) {
    const QuantTraits* tr = quant_traits(t);
    for (int64_t n : {int64_t{256}, int64_t{768}, int64_t{4096}}) {
      SCOPED_TRACE(std::string(dtype_name(t)) + " n=" + std::to_string(n));
      const auto w = random_values(n, seed++, 0.05f);
      const auto a = random_values(n, seed++, 2.0f);
      std::vector<uint8_t> wq(row_size(t, n));
      ASSERT_EQ(quantize_chunk(t, w.data(), wq.data(), 1, n, nullptr), wq.size());
      std::vector<uint8_t> aq(row_size(tr->vec_dot_type, n));
      tr->act_from_float(a.data(), aq.data(), n);
      const auto wd = dequantize(t, wq.data(), n);
      const auto ad = dequantize(tr->vec_dot_type, aq.data(), n);
      double exact = 0;
      for (int64_t i = 0; i < n; ++i) exact += static_cast<double>(wd[i]) * ad[i];
      const double tol = dot_tolerance(tr->vec_dot_type, n, wd, ad, wq.data(), aq.data(), t);
      float got_ref = NAN, got = NAN;
      tr->vec_dot_ref(n, &got_ref, wq.data(), aq.data());
      tr->vec_dot(n, &got, wq.data(), aq.data());
      EXPECT_NEAR(got_ref, exact, tol);
      EXPECT_NEAR(got, exact, tol);
      // And the quantized dot tracks the F32 dot within the formats' rounding (sanity of scale).
      double f32_dot = 0, mag = 0;
      for (int64_t i = 0; i < n; ++i) {
        f32_dot += static_cast<double>(w[i]) * a[i];
        mag += std::fabs(static_cast<double>(w[i]) * a[i]);
      }
      EXPECT_NEAR(got_ref, f32_dot, 0.25 * mag);
    }
  }
}

// SIMD variants against the scalar references over awkward lengths (1 block, odd block counts).
TEST(VecDot, Avx2VariantsMatchScalarReferences) {
  if (!quant::cpu_has_avx2()) GTEST_SKIP() << "CPU without AVX2/FMA/F16C";
  uint32_t seed = 100;
  for (DType t : kWeightTypes) {
    const QuantTraits* tr = quant_traits(t);
    ASSERT_NE(tr->vec_dot, tr->vec_dot_ref) << dtype_name(t) << " has no AVX2 variant";
    const int64_t bs =
        block_size(tr->vec_dot_type) > block_size(t) ? block_size(tr->vec_dot_type) : block_size(t);
    std::vector<int64_t> lengths;
    if (!info(t).quantized) {
      lengths = {1, 7, 8, 31, 32, 33, 63, 100, 257, 1000};
    } else {
      for (int64_t k : {1, 2, 3, 5, 7, 11, 33}) lengths.push_back(k * (bs < 256 ? 32 : 256));
    }
    for (int64_t n : lengths) {
      SCOPED_TRACE(std::string(dtype_name(t)) + " n=" + std::to_string(n));
      auto w = random_values(n, seed++, 0.1f);
      auto a = random_values(n, seed++, 1.0f);
      if (n > 3) w[2] = 0.0f, a[3] = -a[3] * 50.0f;  // a zero and an outlier
      std::vector<uint8_t> wq(row_size(t, n));
      quantize_chunk(t, w.data(), wq.data(), 1, n, nullptr);
      std::vector<uint8_t> aq(row_size(tr->vec_dot_type, n));
      tr->act_from_float(a.data(), aq.data(), n);
      const auto wd = dequantize(t, wq.data(), n);
      const auto ad = dequantize(tr->vec_dot_type, aq.data(), n);
      const double tol = dot_tolerance(tr->vec_dot_type, n, wd, ad, wq.data(), aq.data(), t);
      float ref = NAN, simd = NAN;
      tr->vec_dot_ref(n, &ref, wq.data(), aq.data());
      tr->vec_dot(n, &simd, wq.data(), aq.data());
      EXPECT_NEAR(simd, ref, 2 * tol);
    }
  }
}

// The byte ranges (offset, bytes) of a weight block's F16 scales.
std::vector<std::pair<size_t, size_t>> f16_scale_fields(DType t) {
  switch (t) {
    case DType::Q4_1:
    case DType::Q5_1:
    case DType::Q4_K:
    case DType::Q5_K:
      return {{0, 4}};  // d, then dmin / m
    case DType::Q5_0:
    case DType::IQ4_NL:
    case DType::IQ4_XS:
      return {{0, 2}};
    case DType::Q2_K:
      return {{offsetof(quant::BlockQ2_K, d), 4}};
    case DType::Q3_K:
      return {{offsetof(quant::BlockQ3_K, d), 2}};
    case DType::Q6_K:
      return {{offsetof(quant::BlockQ6_K, d), 2}};
    default:
      return {};
  }
}

// Copies one weight block's F16 scales from `from` (a quantizer's block, finite) into `to`.
void restore_scales(DType t, const uint8_t* from, uint8_t* to) {
  for (const auto& [off, bytes] : f16_scale_fields(t)) std::memcpy(to + off, from + off, bytes);
}

// Sets every activation level of the Q8_0, Q8_1 or Q8_K row aq to `level` (0: random levels), and
// the blocks' sums (Q8_1's s, Q8_K's bsums) to match.
void set_activation_levels(DType at, uint8_t* aq, int64_t n, int level, std::mt19937& rng) {
  auto fill = [&](int8_t* qs, int count) {
    for (int e = 0; e < count; ++e)
      qs[e] = static_cast<int8_t>(level != 0 ? level : static_cast<int>(rng() % 256) - 128);
  };
  if (at == DType::Q8_0) {
    auto* blocks = reinterpret_cast<quant::BlockQ8_0*>(aq);
    for (int64_t i = 0; i < n / 32; ++i) fill(blocks[i].qs, 32);
  } else if (at == DType::Q8_1) {
    auto* blocks = reinterpret_cast<quant::BlockQ8_1*>(aq);
    for (auto* b = blocks; b < blocks + n / 32; ++b) {
      fill(b->qs, 32);
      int sum = 0;
      for (int8_t q : b->qs) sum += q;
      b->s = f32_to_f16(f16_to_f32(b->d) * static_cast<float>(sum));
    }
  } else {
    auto* blocks = reinterpret_cast<quant::BlockQ8_K*>(aq);
    for (auto* b = blocks; b < blocks + n / 256; ++b) {
      fill(b->qs, 256);
      for (int j = 0; j < 16; ++j) {
        int sum = 0;
        for (int e = 16 * j; e < 16 * j + 16; ++e) sum += b->qs[e];
        b->bsums[j] = static_cast<int16_t>(sum);
      }
    }
  }
}

// A vec_dot of one level, type-erased: (n, s, weight blocks, activation blocks).
using AnyVecDot = void (*)(int64_t, float*, const void*, const void*);
template <class W, class A, void (*F)(int64_t, float*, const W*, const A*)>
void any_vec_dot(int64_t n, float* s, const void* x, const void* y) {
  F(n, s, static_cast<const W*>(x), static_cast<const A*>(y));
}
struct LevelDots {
  DType type;
  AnyVecDot avx2, avx512;
  bool is_traits_vec_dot = true;  // the type's QuantTraits::vec_dot (else another order of it)
};
#define KILN_LEVEL_DOTS(T, W, A, F) \
  LevelDots { DType::T, &any_vec_dot<W, A, quant::F##_avx2>, &any_vec_dot<W, A, quant::F##_avx512> }
const LevelDots kLevelDots[] = {
    KILN_LEVEL_DOTS(Q4_1, quant::BlockQ4_1, quant::BlockQ8_1, vec_dot_q4_1_q8_1),
    KILN_LEVEL_DOTS(Q5_0, quant::BlockQ5_0, quant::BlockQ8_0, vec_dot_q5_0_q8_0),
    KILN_LEVEL_DOTS(Q5_1, quant::BlockQ5_1, quant::BlockQ8_1, vec_dot_q5_1_q8_1),
    KILN_LEVEL_DOTS(IQ4_NL, quant::BlockIQ4NL, quant::BlockQ8_0, vec_dot_iq4_nl_q8_0),
    KILN_LEVEL_DOTS(IQ4_XS, quant::BlockIQ4XS, quant::BlockQ8_K, vec_dot_iq4_xs_q8_K),
    KILN_LEVEL_DOTS(Q2_K, quant::BlockQ2_K, quant::BlockQ8_K, vec_dot_q2_K_q8_K),
    KILN_LEVEL_DOTS(Q3_K, quant::BlockQ3_K, quant::BlockQ8_K, vec_dot_q3_K_q8_K),
    KILN_LEVEL_DOTS(Q4_K, quant::BlockQ4_K, quant::BlockQ8_K, vec_dot_q4_K_q8_K),
    KILN_LEVEL_DOTS(Q5_K, quant::BlockQ5_K, quant::BlockQ8_K, vec_dot_q5_K_q8_K),
    KILN_LEVEL_DOTS(Q6_K, quant::BlockQ6_K, quant::BlockQ8_K, vec_dot_q6_K_q8_K),
    LevelDots{DType::IQ4_NL,
              &any_vec_dot<quant::BlockIQ4NL, quant::BlockQ8_0, quant::vec_dot_iq4_nl_q8_0_rows8_avx2>,
              &any_vec_dot<quant::BlockIQ4NL, quant::BlockQ8_0, quant::vec_dot_iq4_nl_q8_0_rows8_avx512>,
              false},
};
#undef KILN_LEVEL_DOTS

// The AVX-512 vec_dots (vec_dots_simd.h with VNNI's integer steps; IQ4_NL also in its rows8 order) against
// the AVX2 ones and the scalar reference, bit for bit against AVX2: quantized rows over awkward lengths,
// and arbitrary weight bytes (every level and scale, F16 scales kept finite) against activations with every
// level -128 or 127, where the integer sums reach their bounds.
TEST(VecDot, Avx512VariantsEqualTheAvx2OnesBitForBit) {
  if (!quant::cpu_has_avx512_vnni()) GTEST_SKIP() << "CPU without AVX-512 VNNI (or KILN_CPU below avx512)";
  uint32_t seed = 500;
  std::mt19937 rng(77);
  for (const LevelDots& l : kLevelDots) {
    const QuantTraits* tr = quant_traits(l.type);
    const int64_t bs = block_size(l.type) > block_size(tr->vec_dot_type) ? block_size(l.type)
                                                                         : block_size(tr->vec_dot_type);
    for (int64_t blocks : {1, 2, 3, 5, 8, 33}) {
      const int64_t n = blocks * bs;
      for (int mode = 0; mode < 4; ++mode) {  // quantized rows; random bytes with -128s, 127s, random
        SCOPED_TRACE(std::string(dtype_name(l.type)) + " n=" + std::to_string(n) +
                     " mode=" + std::to_string(mode));
        const auto w = random_values(n, seed++, 0.1f);
        const auto a = random_values(n, seed++, 1.0f);
        std::vector<uint8_t> wq(row_size(l.type, n));
        quantize_chunk(l.type, w.data(), wq.data(), 1, n, nullptr);
        std::vector<uint8_t> aq(row_size(tr->vec_dot_type, n));
        tr->act_from_float(a.data(), aq.data(), n);
        if (mode > 0) {
          // Arbitrary weight bytes but the F16 scales (the quantizer's, left in place: each block
          // type's d, and dmin / m where present, lead or trail its level bytes as quantized) ...
          std::vector<uint8_t> keep = wq;
          for (uint8_t& b : wq) b = static_cast<uint8_t>(rng());
          const size_t wb = type_size(l.type);
          for (size_t b = 0; b < wq.size(); b += wb) restore_scales(l.type, keep.data() + b, wq.data() + b);
          // ... and activation levels at an extreme (or random), their sums made to match.
          set_activation_levels(tr->vec_dot_type, aq.data(), n, mode == 1 ? -128 : mode == 2 ? 127 : 0, rng);
        }
        float ref = NAN, avx2 = NAN, avx512 = NAN, chosen = NAN;
        tr->vec_dot_ref(n, &ref, wq.data(), aq.data());
        l.avx2(n, &avx2, wq.data(), aq.data());
        l.avx512(n, &avx512, wq.data(), aq.data());
        EXPECT_EQ(std::memcmp(&avx2, &avx512, sizeof(float)), 0) << avx2 << " vs " << avx512;
        if (l.is_traits_vec_dot) {
          tr->vec_dot(n, &chosen, wq.data(), aq.data());  // the level quant_traits chose
          EXPECT_EQ(std::memcmp(&avx2, &chosen, sizeof(float)), 0) << avx2 << " vs " << chosen;
        }
        if (mode == 0) {
          const auto wd = dequantize(l.type, wq.data(), n);
          const auto ad = dequantize(tr->vec_dot_type, aq.data(), n);
          const double tol = dot_tolerance(tr->vec_dot_type, n, wd, ad, wq.data(), aq.data(), l.type);
          EXPECT_NEAR(avx512, ref, 2 * tol);
        }
      }
    }
  }
}

TEST(Activations, Q8_0RoundsHalfToEvenWithMultiplier127OverAmax) {
  float x[32] = {};
  x[0] = 127.0f;  // amax 127: multiplier exactly 1
  x[1] = 2.5f;
  x[2] = 3.5f;
  x[3] = -2.5f;
  x[4] = 0.5f;
  x[5] = -126.5f;
  quant::BlockQ8_0 act, ref;
  quant_traits(DType::Q8_0)->from_float(x, &act, 32);
  quant::quantize_row_q8_0_ref(x, &ref, 32);
  EXPECT_EQ(act.d, f32_to_f16(1.0f));
  EXPECT_EQ(act.qs[0], 127);
  EXPECT_EQ(act.qs[1], 2);
  EXPECT_EQ(act.qs[2], 4);
  EXPECT_EQ(act.qs[3], -2);
  EXPECT_EQ(act.qs[4], 0);
  EXPECT_EQ(act.qs[5], -126);
  EXPECT_EQ(ref.qs[1], 3);  // the reference quantizer rounds half away from zero
  EXPECT_EQ(ref.qs[5], -127);
  // A tiny (subnormal) maximum makes 127/amax infinite: inf and 0*inf saturate to -128 as the
  // AVX2 conversion does.
  float tiny[32] = {};
  tiny[0] = 1e-45f;
  quant_traits(DType::Q8_0)->from_float(tiny, &act, 32);
  EXPECT_EQ(act.qs[0], -128);
  EXPECT_EQ(act.qs[1], -128);
  // All-zero block: zero scale and levels.
  float z[32] = {};
  quant_traits(DType::Q8_0)->from_float(z, &act, 32);
  EXPECT_EQ(act.d, 0);
  for (int8_t q : act.qs) EXPECT_EQ(q, 0);
}

TEST(Activations, Avx2QuantizersMatchScalar) {
  if (!quant::cpu_has_avx2()) GTEST_SKIP() << "CPU without AVX2/FMA/F16C";
  const int64_t n = 32 * 64;
  auto x = random_values(n, 41, 2.0f);
  for (int j = 0; j < 32; ++j) x[j] = (j - 16) + 0.5f;  // block 0: amax 15.5, products near ties
  for (int j = 0; j < 32; ++j) x[32 + j] = j % 2 ? 127.0f : -(j + 0.5f);  // block 1: exact ties
  for (int j = 0; j < 32; ++j) x[64 + j] = 0.0f;                          // block 2: zeros
  x[96] = 1e-45f;                                                         // block 3: subnormal max
  for (int j = 1; j < 32; ++j) x[96 + j] = j % 3 ? 0.0f : -1e-45f;
  std::vector<quant::BlockQ8_0> a0(n / 32), b0(n / 32);
  quant::quantize_row_q8_0_x86(x.data(), a0.data(), n);
  quant::quantize_row_q8_0_x86_avx2(x.data(), b0.data(), n);
  EXPECT_EQ(std::memcmp(a0.data(), b0.data(), a0.size() * sizeof(a0[0])), 0);
  std::vector<quant::BlockQ8_1> a1(n / 32), b1(n / 32);
  quant::quantize_row_q8_1_x86(x.data(), a1.data(), n);
  quant::quantize_row_q8_1_x86_avx2(x.data(), b1.data(), n);
  EXPECT_EQ(std::memcmp(a1.data(), b1.data(), a1.size() * sizeof(a1[0])), 0);
  EXPECT_EQ(b0[1].qs[0], -0);  // -0.5 rounds to even (0)
  EXPECT_EQ(b0[1].qs[2], -2);  // -2.5 -> -2
}

// The AVX2 Q8_K quantizer writes quantize_row_q8_K_ref's bytes (into buffers of different
// garbage, so every byte must be written): random super-blocks of several scales, and blocks whose
// maximum is negative, tied in magnitude with the opposite sign (the first one counts), subnormal,
// infinite, among NaNs or absent (zeros, -0, all NaN), levels at exact .5 ties, bsums at +-2032.
TEST(Activations, Avx2Q8_KQuantizerMatchesTheReference) {
  if (!quant::cpu_has_avx2()) GTEST_SKIP() << "CPU without AVX2/FMA/F16C";
  const int64_t special = 14, n = 256 * (special + 20);
  auto x = random_values(n, 43, 3.0f);
  for (int64_t b = special; b < n / 256; ++b)
    for (int j = 0; j < 256; ++j) x[b * 256 + j] *= std::ldexp(1.0f, static_cast<int>(b % 7) * 5 - 15);
  auto block = [&](int64_t b) { return x.begin() + b * 256; };
  block(0)[77] = -50.0f;                                              // a negative maximum
  block(1)[9] = -20.0f, block(1)[3] = 20.0f, block(1)[200] = -20.0f;  // ties: the first (+20) counts
  block(2)[3] = -20.0f, block(2)[9] = 20.0f;                          // ... here -20
  for (int j = 0; j < 256; ++j) block(3)[j] = static_cast<float>(j % 200 - 100) + 0.5f;  // ties of .5
  block(3)[0] = -127.0f;                                                                 // iscale 1
  std::fill(block(4), block(4) + 256, 0.0f);
  std::fill(block(5), block(5) + 256, -0.0f);
  block(5)[100] = 1e-45f;                      // a subnormal maximum: iscale overflows to -inf
  std::fill(block(6), block(6) + 256, -1.0f);  // the maximum's level is -127: bsums -2032
  std::fill(block(7), block(7) + 256, -1.0f);  // after a first +1 every level is 127: bsums 2032
  block(7)[0] = 1.0f;
  block(8)[5] = std::numeric_limits<float>::infinity();
  block(9)[1] = std::numeric_limits<float>::quiet_NaN(),
  block(9)[250] = -std::numeric_limits<float>::quiet_NaN();
  block(9)[0] = -std::numeric_limits<float>::infinity() * 0.0f;  // a NaN first
  std::fill(block(10), block(10) + 256, std::numeric_limits<float>::quiet_NaN());
  std::fill(block(11), block(11) + 256, 0.0f);
  block(11)[255] = -3.0f;                                               // the maximum last
  for (int j = 0; j < 256; ++j) block(12)[j] = j % 2 ? 1e30f : -1e30f;  // large, tied from the start
  std::fill(block(13), block(13) + 256, -0.0f);
  const size_t bytes = static_cast<size_t>(n / 256) * sizeof(quant::BlockQ8_K);
  std::vector<uint8_t> want(bytes, 0xAA), got(bytes, 0x55);
  quant::quantize_row_q8_K_ref(x.data(), reinterpret_cast<quant::BlockQ8_K*>(want.data()), n);
  quant::quantize_row_q8_K_avx2(x.data(), reinterpret_cast<quant::BlockQ8_K*>(got.data()), n);
  for (int64_t b = 0; b < n / 256; ++b) {
    const size_t at = static_cast<size_t>(b) * sizeof(quant::BlockQ8_K);
    EXPECT_EQ(std::memcmp(want.data() + at, got.data() + at, sizeof(quant::BlockQ8_K)), 0)
        << "super-block " << b;
  }
  const auto* q = reinterpret_cast<const quant::BlockQ8_K*>(got.data());
  EXPECT_EQ(q[1].d, 1 / (-127.f / 20.0f));
  EXPECT_EQ(q[2].d, 1 / (-127.f / -20.0f));
  EXPECT_EQ(q[3].qs[1], -98);  // -98.5 and -97.5 (iscale 1) round to even
  EXPECT_EQ(q[3].qs[2], -98);
  EXPECT_EQ(q[6].bsums[0], -2032);
  EXPECT_EQ(q[7].bsums[15], 2032);
  // The traits choose it on AVX2 CPUs.
  std::vector<uint8_t> traits(bytes, 0x33);
  quant_traits(DType::Q8_K)->from_float(x.data(), traits.data(), n);
  EXPECT_EQ(traits, want);
}

TEST(Activations, Q8_1StoresDTimesSumAndBoundsTheError) {
  const int64_t n = 32 * 40;
  const auto x = random_values(n, 7, 3.0f);
  std::vector<quant::BlockQ8_1> q(static_cast<size_t>(n / 32));
  quant_traits(DType::Q8_1)->from_float(x.data(), q.data(), n);
  const auto y = dequantize(DType::Q8_1, q.data(), n);
  for (int64_t ib = 0; ib < n / 32; ++ib) {
    float amax = 0;
    int sum = 0;
    for (int j = 0; j < 32; ++j) {
      amax = std::max(amax, std::fabs(x[ib * 32 + j]));
      sum += q[ib].qs[j];
    }
    const float d = amax / 127.f;
    EXPECT_EQ(q[ib].d, f32_to_f16(d));
    EXPECT_EQ(q[ib].s, f32_to_f16(d * static_cast<float>(sum)));
    const float dq = f16_to_f32(q[ib].d);
    for (int j = 0; j < 32; ++j) {
      const float xi = x[ib * 32 + j];
      // Half a step of the F32 scale, plus the F16 rounding of the scale applied to |level| <= 127.
      EXPECT_LE(std::fabs(y[ib * 32 + j] - xi), 0.5f * d + 127.0f * std::fabs(dq - d) + 1e-6f * amax);
    }
  }
}

TEST(Activations, Q8_KRoundTripBsumsAndDot) {
  const int64_t n = 256 * 6;
  auto x = random_values(n, 11, 4.0f);
  x[300] = -40.0f;  // a negative signed maximum in block 1
  std::vector<float> zeros(256, 0.0f);
  std::copy(zeros.begin(), zeros.end(), x.begin() + 512);  // an all-zero block
  std::vector<quant::BlockQ8_K> q(static_cast<size_t>(n / 256));
  quant_traits(DType::Q8_K)->from_float(x.data(), q.data(), n);
  const auto y = dequantize(DType::Q8_K, q.data(), n);
  for (int64_t ib = 0; ib < n / 256; ++ib) {
    float max = 0, amax = 0;
    for (int j = 0; j < 256; ++j) {
      if (std::fabs(x[ib * 256 + j]) > amax) amax = std::fabs(x[ib * 256 + j]), max = x[ib * 256 + j];
    }
    if (amax == 0) {
      EXPECT_EQ(q[ib].d, 0.0f);
    } else {
      EXPECT_EQ(q[ib].d, 1 / (-127.f / max));  // from the signed maximum
    }
    for (int g = 0; g < 16; ++g) {
      int sum = 0;
      for (int j = 0; j < 16; ++j) sum += q[ib].qs[g * 16 + j];
      EXPECT_EQ(q[ib].bsums[g], sum);
    }
    for (int j = 0; j < 256; ++j) {
      EXPECT_LE(std::fabs(y[ib * 256 + j] - x[ib * 256 + j]), 0.5f * std::fabs(q[ib].d) * (1 + 1e-5f));
    }
  }
  // d = -max/127 carries the sign: the maximum -40 of block 1 is level -127 with a positive d.
  EXPECT_GT(q[1].d, 0.0f);
  EXPECT_EQ(q[1].qs[300 - 256], -127);
  // Dot of a Q4_K row with the Q8_K activations against the F32 dot of the dequantized weights
  // with the unquantized activations: bounded by the activation rounding, sum |w| * |d| / 2.
  const auto w = random_values(n, 12, 0.1f);
  std::vector<uint8_t> wq(row_size(DType::Q4_K, n));
  quantize_chunk(DType::Q4_K, w.data(), wq.data(), 1, n, nullptr);
  const auto wd = dequantize(DType::Q4_K, wq.data(), n);
  double exact = 0, bound = 0;
  for (int64_t i = 0; i < n; ++i) {
    exact += static_cast<double>(wd[i]) * x[i];
    bound += std::fabs(wd[i]) * 0.5 * std::fabs(q[i / 256].d) + std::fabs(wd[i] * x[i]) * 1e-5;
  }
  float got = NAN;
  quant_traits(DType::Q4_K)->vec_dot(n, &got, wq.data(), q.data());
  EXPECT_NEAR(got, exact, bound);
}

// Round-trip error of each weight format, with and without an importance matrix: relative RMS
// error below what the format's bit width allows (generous margins over llama.cpp's own numbers).
TEST(Quantize, RoundTripErrorPerFormat) {
  struct Case {
    DType t;
    double max_rel_rms;
  };
  const Case cases[] = {{DType::F16, 1e-3},  {DType::BF16, 8e-3},  {DType::Q8_0, 0.01},   {DType::Q6_K, 0.03},
                        {DType::Q5_0, 0.06}, {DType::Q5_1, 0.06},  {DType::Q5_K, 0.06},   {DType::Q4_0, 0.12},
                        {DType::Q4_1, 0.12}, {DType::Q4_K, 0.12},  {DType::IQ4_NL, 0.12}, {DType::Q3_K, 0.25},
                        {DType::Q2_K, 0.5},  {DType::IQ4_XS, 0.12}};
  const int64_t n_per_row = 512, nrows = 6;
  const auto x = random_values(n_per_row * nrows, 21, 0.2f);
  std::vector<float> imatrix(static_cast<size_t>(n_per_row));
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> u(0.1f, 4.0f);
  for (auto& v : imatrix) v = u(rng);
  for (const Case& c : cases) {
    for (const float* im : {static_cast<const float*>(nullptr), static_cast<const float*>(imatrix.data())}) {
      SCOPED_TRACE(std::string(dtype_name(c.t)) + (im ? " imatrix" : ""));
      std::vector<uint8_t> q(row_size(c.t, n_per_row) * nrows);
      ASSERT_EQ(quantize_chunk(c.t, x.data(), q.data(), nrows, n_per_row, im), q.size());
      const auto y = dequantize(c.t, q.data(), n_per_row * nrows);
      double err = 0, ref = 0;
      for (size_t i = 0; i < x.size(); ++i) {
        ASSERT_TRUE(std::isfinite(y[i]));
        err += (y[i] - x[i]) * static_cast<double>(y[i] - x[i]);
        ref += x[i] * static_cast<double>(x[i]);
      }
      EXPECT_LT(std::sqrt(err / ref), c.max_rel_rms);
    }
  }
}

TEST(Quantize, ZeroRowsStayZero) {
  const int64_t n = 512;
  const std::vector<float> x(static_cast<size_t>(n), 0.0f);
  std::vector<float> imatrix(static_cast<size_t>(n), 1.0f);
  for (DType t : kWeightTypes) {
    for (const float* im : {static_cast<const float*>(nullptr), static_cast<const float*>(imatrix.data())}) {
      SCOPED_TRACE(dtype_name(t));
      std::vector<uint8_t> q(row_size(t, n));
      quantize_chunk(t, x.data(), q.data(), 1, n, im);
      for (float v : dequantize(t, q.data(), n)) ASSERT_EQ(v, 0.0f);
    }
  }
}

// The reference path quantizes rows independently: a chunk of rows equals rows done one by one,
// with and without an importance matrix.
TEST(Quantize, ChunkEqualsRowByRow) {
  const int64_t n_per_row = 256, nrows = 3;
  const auto x = random_values(n_per_row * nrows, 31, 1.0f);
  const auto imatrix = random_values(n_per_row, 32, 1.0f);
  std::vector<float> im_pos(imatrix.size());
  for (size_t i = 0; i < im_pos.size(); ++i) im_pos[i] = std::fabs(imatrix[i]) + 0.01f;
  for (DType t : kWeightTypes) {
    for (const float* im : {static_cast<const float*>(nullptr), static_cast<const float*>(im_pos.data())}) {
      SCOPED_TRACE(dtype_name(t));
      const size_t rs = row_size(t, n_per_row);
      std::vector<uint8_t> all(rs * nrows), one(rs * nrows);
      quantize_chunk(t, x.data(), all.data(), nrows, n_per_row, im);
      for (int64_t r = 0; r < nrows; ++r) {
        quantize_chunk(t, x.data() + r * n_per_row, one.data() + r * rs, 1, n_per_row, im);
      }
      EXPECT_EQ(all, one);
    }
  }
}

}  // namespace
}  // namespace kiln
