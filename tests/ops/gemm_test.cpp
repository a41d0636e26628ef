// The matrix families of mul_mat (ops/gemm): every SIMD kernel bit-identical to its scalar kernel,
// every scalar kernel against the reference dot products, prepared and plain weights alike, over
// awkward sizes; and mul_mat's result for a row independent of the rest of its batch.
#include "ops/gemm/gemm.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <iterator>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "core/half.h"
#include "op_harness.h"
#include "ops/gemm/layouts.h"
#include "ops/quant/kernels.h"
#include "ops/quant/quant.h"
#include "ops/weight_prep.h"

namespace kiln::test {
namespace {

using gemm::Tile;
using TileFn = void (*)(const Tile&);

// Rows of `type` from normal values, each row with its own scale (and a few exact zeros, so that
// blocks with d = 0 occur).
std::vector<uint8_t> random_rows(DType type, int64_t n_rows, int64_t k, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> v(static_cast<size_t>(n_rows * k));
  for (int64_t r = 0; r < n_rows; ++r)
    for (int64_t i = 0; i < k; ++i)
      v[static_cast<size_t>(r * k + i)] = r % 5 == 3 && i < 64 ? 0.0f : dist(rng) * (1 + r % 3);
  std::vector<uint8_t> out(static_cast<size_t>(n_rows) * row_size(type, k));
  quantize_chunk(type, v.data(), out.data(), n_rows, k, nullptr);
  return out;
}

std::vector<float> random_floats(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = dist(rng);
  return v;
}

// m activation rows of k values converted by `family` into rows `stride` bytes apart.
std::vector<uint8_t> converted(const gemm::Family& family, int64_t m, int64_t k, uint32_t seed,
                               size_t* stride) {
  *stride = gemm::act_row_bytes(family, k) + 8;  // padded apart
  const std::vector<float> x = random_floats(m * k, seed);
  std::vector<uint8_t> out(static_cast<size_t>(m) * *stride, 0xAB);
  for (int64_t r = 0; r < m; ++r) family.convert_act(x.data() + r * k, out.data() + r * *stride, k);
  return out;
}

struct TileCase {
  const char* name;
  DType type;
  TensorLayout layout;
  TileFn scalar, simd;
  std::vector<int64_t> ks, rows;
  TileFn avx512 = nullptr;  // the AVX-512 kernel, where the family has one
};

// The SIMD kernels of a case this CPU can run (AVX2, then AVX-512), each to equal the scalar one.
std::vector<std::pair<const char*, TileFn>> simd_levels(const TileCase& c) {
  std::vector<std::pair<const char*, TileFn>> out;
  if (quant::cpu_has_avx2()) out.emplace_back("avx2", c.simd);
  if (quant::cpu_has_avx512_vnni() && c.avx512 != nullptr) out.emplace_back("avx512", c.avx512);
  return out;
}

// Runs `fn` over all rows x m activations, outputs `col_stride` floats apart; returns the outputs.
std::vector<float> run_tile(TileFn fn, const TileCase& c, const std::vector<uint8_t>& w, size_t w_stride,
                            int64_t n_rows, int64_t k, const std::vector<uint8_t>& act, size_t act_stride,
                            int64_t m, int col_stride, int64_t n_gemm_act = 0) {
  std::vector<float> out(static_cast<size_t>(m * n_rows * col_stride), -7.0f);
  Tile t;
  t.type = c.type;
  t.k = k;
  t.w = reinterpret_cast<const char*>(w.data());
  t.w_stride = w_stride;
  t.n_rows = n_rows;
  t.act = reinterpret_cast<const char*>(act.data());
  t.act_stride = act_stride;
  t.n_act = m;
  t.n_gemm_act = n_gemm_act;
  t.dst = out.data();
  t.dst_row_stride = static_cast<size_t>(n_rows * col_stride) * sizeof(float);
  t.dst_col_stride = static_cast<size_t>(col_stride) * sizeof(float);
  fn(t);
  return out;
}

std::vector<TileCase> tile_cases() {
  return {
      {"q4_0x8",
       DType::Q4_0,
       TensorLayout::Q4_0x8,
       gemm::gemm_q4_0x8,
       gemm::gemm_q4_0x8_avx2,
       {32, 96, 2080},
       {8, 24},
       gemm::gemm_q4_0x8_avx512},
      {"q4_Kx8",
       DType::Q4_K,
       TensorLayout::Q4_Kx8,
       gemm::gemm_q4_Kx8,
       gemm::gemm_q4_Kx8_avx2,
       {256, 768},
       {8, 16},
       gemm::gemm_q4_Kx8_avx512},
      {"q8_0x8",
       DType::Q8_0,
       TensorLayout::Q8_0x8,
       gemm::gemm_q8_0x8,
       gemm::gemm_q8_0x8_avx2,
       {32, 160, 2080},
       {8, 24},
       gemm::gemm_q8_0x8_avx512},
      {"q8_0",
       DType::Q8_0,
       TensorLayout::Plain,
       gemm::gemm_q8_0,
       gemm::gemm_q8_0_avx2,
       {32, 160, 2048},
       {1, 3, 8},
       gemm::gemm_q8_0_avx512},
      {"q6_K",
       DType::Q6_K,
       TensorLayout::Plain,
       gemm::gemm_q6_K,
       gemm::gemm_q6_K_avx2,
       {256, 768, 2304},
       {1, 3, 6, 9},
       gemm::gemm_q6_K_avx512},
      {"q5_K",
       DType::Q5_K,
       TensorLayout::Plain,
       gemm::gemm_q5_K,
       gemm::gemm_q5_K_avx2,
       {256, 1280},
       {1, 4, 9},
       gemm::gemm_q5_K_avx512},
      {"q5_0",
       DType::Q5_0,
       TensorLayout::Plain,
       gemm::gemm_q5_0,
       gemm::gemm_q5_0_avx2,
       {32, 160, 2080},
       {1, 3, 6, 8},
       gemm::gemm_q5_0_avx512},
      {"q4_1",
       DType::Q4_1,
       TensorLayout::Plain,
       gemm::gemm_q4_1,
       gemm::gemm_q4_1_avx2,
       {32, 160, 2080},
       {1, 3, 6, 8},
       gemm::gemm_q4_1_avx512},
      {"q5_1",
       DType::Q5_1,
       TensorLayout::Plain,
       gemm::gemm_q5_1,
       gemm::gemm_q5_1_avx2,
       {32, 160},
       {1, 3, 6, 8},
       gemm::gemm_q5_1_avx512},
      {"q3_K",
       DType::Q3_K,
       TensorLayout::Plain,
       gemm::gemm_q3_K,
       gemm::gemm_q3_K_avx2,
       {256, 1280},
       {1, 4, 9},
       gemm::gemm_q3_K_avx512},
      {"q2_K",
       DType::Q2_K,
       TensorLayout::Plain,
       gemm::gemm_q2_K,
       gemm::gemm_q2_K_avx2,
       {256, 1280},
       {1, 4, 9},
       gemm::gemm_q2_K_avx512},
      {"f16",
       DType::F16,
       TensorLayout::Plain,
       gemm::gemm_f16,
       gemm::gemm_f16_avx2,
       {16, 48, 2048},
       {1, 3, 20}},
      {"iq4_xs",
       DType::IQ4_XS,
       TensorLayout::Plain,
       gemm::gemm_iq4_xs,
       gemm::gemm_iq4_xs_avx2,
       {256, 768, 2304},
       {1, 3, 8, 13, 16},
       gemm::gemm_iq4_xs_avx512},
      {"bf16", DType::BF16, TensorLayout::Plain, gemm::gemm_bf16, gemm::gemm_bf16_avx2, {16, 80}, {2, 5, 17}},
      {"f32",
       DType::F32,
       TensorLayout::Plain,
       gemm::gemm_f32,
       gemm::gemm_f32_avx2,
       {16, 64, 1040},
       {1, 4, 19}},
      {"f16_split16",
       DType::F16,
       TensorLayout::Split16,
       gemm::gemm_f16_split16,
       gemm::gemm_f16_split16_avx2,
       {16, 48, 2048},
       {1, 3, 6, 20}},
      {"bf16_split16",
       DType::BF16,
       TensorLayout::Split16,
       gemm::gemm_bf16_split16,
       gemm::gemm_bf16_split16_avx2,
       {16, 80},
       {2, 5, 17}},
      {"f32_split16",
       DType::F32,
       TensorLayout::Split16,
       gemm::gemm_f32_split16,
       gemm::gemm_f32_split16_avx2,
       {16, 64, 1040},
       {1, 4, 19}},
  };
}

// Weights of a case in its layout: bytes and the stride between rows (plain) or groups.
std::vector<uint8_t> weights_in_layout(const TileCase& c, int64_t n_rows, int64_t k, uint32_t seed,
                                       size_t* stride) {
  std::vector<uint8_t> plain = random_rows(c.type, n_rows, k, seed);
  const TensorView v = contiguous_view(c.type, {k, n_rows, 1, 1}, plain.data());
  if (c.layout == TensorLayout::Plain) {
    *stride = row_size(c.type, k);
    return plain;
  }
  std::vector<uint8_t> prepared(gemm::prepared_bytes(v, c.layout));
  gemm::prepare(v, c.layout, prepared.data());
  TensorView pv = v;
  pv.layout = c.layout;
  *stride = prepared.size() / static_cast<size_t>(n_rows / gemm::family_for(pv).row_group);
  return prepared;
}

TEST(GemmKernels, SimdKernelsEqualTheirScalarKernels) {
  if (!quant::cpu_has_avx2()) GTEST_SKIP() << "no AVX2 on this CPU: only the scalar kernels run here";
  uint32_t seed = 1;
  for (const TileCase& c : tile_cases()) {
    const TensorView probe = contiguous_view(c.type, {c.ks[0], c.rows[0], 1, 1}, nullptr);
    const gemm::Family& fam = gemm::family_for([&] {
      TensorView v = probe;
      v.layout = c.layout;
      return v;
    }());
    for (int64_t k : c.ks) {
      for (int64_t n_rows : c.rows) {
        size_t w_stride = 0, a_stride = 0;
        const std::vector<uint8_t> w = weights_in_layout(c, n_rows, k, ++seed, &w_stride);
        const std::vector<uint8_t> act = converted(fam, 11, k, ++seed, &a_stride);
        for (int64_t m : {1, 2, 3, 4, 5, 8, 11}) {
          // Prompt-order rows (Tile::n_gemm_act): none, ggml's split (m - m % 4), some, all.
          for (int64_t n_gemm : {int64_t{0}, m - m % 4, m / 2 + 1, m}) {
            for (int col_stride : {1, 3}) {
              const auto want =
                  run_tile(c.scalar, c, w, w_stride, n_rows, k, act, a_stride, m, col_stride, n_gemm);
              for (const auto& [level, fn] : simd_levels(c)) {
                const auto got = run_tile(fn, c, w, w_stride, n_rows, k, act, a_stride, m, col_stride, n_gemm);
                ASSERT_EQ(std::memcmp(want.data(), got.data(), want.size() * sizeof(float)), 0)
                    << c.name << " " << level << " k=" << k << " rows=" << n_rows << " m=" << m
                    << " n_gemm_act=" << n_gemm << " col_stride=" << col_stride;
              }
            }
          }
        }
      }
    }
  }
}

// IQ4_XS's SIMD kernels keep up to 64 activation rows' accumulators per pass over the weights:
// bands of up to 70 rows (one pass, a full one, one more row, a second short pass), panel rows from
// none to all, weight rows in groups of eight and a short last group.
TEST(GemmKernels, Iq4XsSimdKernelEqualsItsScalarKernelOverLongBands) {
  if (!quant::cpu_has_avx2()) GTEST_SKIP() << "no AVX2 on this CPU";
  const std::vector<TileCase> all = tile_cases();
  const auto it =
      std::find_if(all.begin(), all.end(), [](const TileCase& c) { return c.type == DType::IQ4_XS; });
  ASSERT_NE(it, all.end());
  const TileCase& iq = *it;
  const TensorView probe = contiguous_view(DType::IQ4_XS, {256, 8, 1, 1}, nullptr);
  const gemm::Family& fam = gemm::family_for(probe);
  uint32_t seed = 40;
  for (int64_t k : {256, 1280}) {
    for (int64_t n_rows : {5, 16, 21}) {
      size_t w_stride = 0, a_stride = 0;
      const std::vector<uint8_t> w = weights_in_layout(iq, n_rows, k, ++seed, &w_stride);
      const std::vector<uint8_t> act = converted(fam, 70, k, ++seed, &a_stride);
      for (int64_t m : {7, 8, 9, 63, 64, 65, 70}) {
        for (int64_t n_gemm : {int64_t{0}, m / 2 + 1, m}) {
          const auto want = run_tile(iq.scalar, iq, w, w_stride, n_rows, k, act, a_stride, m, 1, n_gemm);
          for (const auto& [level, fn] : simd_levels(iq)) {
            const auto got = run_tile(fn, iq, w, w_stride, n_rows, k, act, a_stride, m, 1, n_gemm);
            ASSERT_EQ(std::memcmp(want.data(), got.data(), want.size() * sizeof(float)), 0)
                << level << " k=" << k << " rows=" << n_rows << " m=" << m << " n_gemm_act=" << n_gemm;
          }
        }
      }
    }
  }
}

// ggml's IQ panel order (ggml-cpu/iqp.cpp) for IQ4_XS, stated directly: per super-block the exact
// integer sum of scale * level * activation, added as fma(float(sum), d_w * d_a, acc).
float iq_panel_dot(int64_t k, const quant::BlockIQ4XS* w, const quant::BlockQ8_K* a) {
  float acc = 0;
  for (int64_t s = 0; s < k / 256; ++s) {
    int64_t sum = 0;
    for (int e = 0; e < 256; ++e) {
      const uint8_t q = w[s].qs[16 * (e / 32) + e % 16];
      const int level = quant::kValuesIQ4NL[e % 32 < 16 ? q & 0xF : q >> 4];
      sum += int64_t{quant::iq4_xs_scale(w[s], e / 32)} * level * a[s].qs[e];
    }
    acc = std::fma(static_cast<float>(sum), f16_to_f32(w[s].d) * a[s].d, acc);
  }
  return acc;
}

// The scalar kernels against quant.h's dot products of the same order, bit for bit: of five
// activation rows, the first four in the prompt order (ggml's gemm rows), the fifth in the
// one-token order.
TEST(GemmKernels, ScalarKernelsMatchTheReferenceDots) {
  uint32_t seed = 100;
  for (const TileCase& c : tile_cases()) {
    // The plain quant types' (IQ4_XS included) and the float types' tile families (and the quant
    // types' references, the AVX2 vec_dots) exist on AVX2 CPUs only.
    if (c.type != DType::Q4_0 && c.type != DType::Q4_K && !quant::cpu_has_avx2()) continue;
    TensorView probe = contiguous_view(c.type, {c.ks[0], c.rows[0], 1, 1}, nullptr);
    probe.layout = c.layout;
    const gemm::Family& fam = gemm::family_for(probe);
    const QuantTraits* q = quant_traits(c.type);
    const QuantTraits* qa = quant_traits(q->vec_dot_type);
    for (int64_t k : c.ks) {
      const int64_t n_rows = c.rows.back(), m = 5;
      std::vector<uint8_t> plain = random_rows(c.type, n_rows, k, ++seed);
      size_t w_stride = row_size(c.type, k);
      std::vector<uint8_t> w = plain;
      if (c.layout != TensorLayout::Plain) {
        const TensorView v = contiguous_view(c.type, {k, n_rows, 1, 1}, plain.data());
        w.resize(gemm::prepared_bytes(v, c.layout));
        gemm::prepare(v, c.layout, w.data());
        w_stride = w.size() / static_cast<size_t>(n_rows / fam.row_group);
      }
      const std::vector<float> x = random_floats(m * k, ++seed);
      size_t a_stride = gemm::act_row_bytes(fam, k);
      std::vector<uint8_t> act(static_cast<size_t>(m) * a_stride), native(row_size(q->vec_dot_type, k));
      for (int64_t r = 0; r < m; ++r) fam.convert_act(x.data() + r * k, act.data() + r * a_stride, k);
      const int64_t n_gemm = m - m % 4;
      const auto got = run_tile(c.scalar, c, w, w_stride, n_rows, k, act, a_stride, m, 1, n_gemm);
      for (int64_t r = 0; r < m; ++r) {
        qa->from_float(x.data() + r * k, native.data(), k);  // the activation as quant.h converts it
        for (int64_t i = 0; i < n_rows; ++i) {
          const uint8_t* row = plain.data() + static_cast<size_t>(i) * row_size(c.type, k);
          const float out = got[static_cast<size_t>(r * n_rows + i)];
          const std::string where = std::string(c.name) + " k=" + std::to_string(k) + " row " +
                                    std::to_string(i) + " act " + std::to_string(r);
          float want = 0;
          if (c.type == DType::Q4_0) {
            quant::vec_dot_q4_0_q8_0_rows8(k, &want, reinterpret_cast<const quant::BlockQ4_0*>(row),
                                           reinterpret_cast<const quant::BlockQ8_0*>(native.data()));
          } else if (c.type == DType::Q4_K) {
            const auto dot = r < n_gemm ? quant::vec_dot_q4_K_q8_K_rows8_x4 : quant::vec_dot_q4_K_q8_K_rows8;
            dot(k, &want, reinterpret_cast<const quant::BlockQ4_K*>(row),
                reinterpret_cast<const quant::BlockQ8_K*>(native.data()));
          } else if (c.type == DType::Q8_0) {
            quant::vec_dot_q8_0_q8_0_avx2(k, &want, reinterpret_cast<const quant::BlockQ8_0*>(row),
                                          reinterpret_cast<const quant::BlockQ8_0*>(native.data()));
          } else if (c.type == DType::Q6_K) {
            quant::vec_dot_q6_K_q8_K_avx2(k, &want, reinterpret_cast<const quant::BlockQ6_K*>(row),
                                          reinterpret_cast<const quant::BlockQ8_K*>(native.data()));
          } else if (c.type == DType::Q5_K) {
            quant::vec_dot_q5_K_q8_K_avx2(k, &want, reinterpret_cast<const quant::BlockQ5_K*>(row),
                                          reinterpret_cast<const quant::BlockQ8_K*>(native.data()));
          } else if (c.type == DType::IQ4_XS) {
            const auto* wr = reinterpret_cast<const quant::BlockIQ4XS*>(row);
            const auto* ar = reinterpret_cast<const quant::BlockQ8_K*>(native.data());
            if (r < n_gemm)
              want = iq_panel_dot(k, wr, ar);
            else
              quant::vec_dot_iq4_xs_q8_K_avx2(k, &want, wr, ar);
          } else if (info(c.type).quantized) {
            q->vec_dot(k, &want, row, native.data());  // Q5_0, Q4_1, Q5_1, Q3_K, Q2_K: the AVX2 vec_dot
          } else {
            // F16, BF16, F32: no dot product of quant.h has tinyBLAS's order (the scalar kernel is
            // its reference, TinyBlasOrderHasSixteenLanes checks the order); it must still be the
            // dot product, to float rounding.
            std::vector<float> wr(static_cast<size_t>(k)), ar(static_cast<size_t>(k));
            q->to_float(row, wr.data(), k);
            qa->to_float(native.data(), ar.data(), k);
            double exact = 0, scale = 0;
            for (int64_t e = 0; e < k; ++e) {
              const double p = double{wr[static_cast<size_t>(e)]} * ar[static_cast<size_t>(e)];
              exact += p;
              scale += std::fabs(p);
            }
            EXPECT_NEAR(out, exact, 1e-6 * scale) << where;
            continue;
          }
          EXPECT_EQ(std::memcmp(&out, &want, sizeof(float)), 0) << where << ": " << out << " vs " << want;
        }
      }
    }
  }
}

// The Q6_K, Q5_K, Q3_K, Q2_K and Q4_Kx8 tiles on arbitrary block bytes (every level, scale and min, Q6_K's
// scale -128 included) and Q8_K activations at their extremes (levels -128 and 127, so the bias and
// the integer sums reach their bounds), against the scalar kernels bit for bit at every SIMD level:
// 1..70 activation rows (the tile's one-row path, its 64-row passes and their remainders), 17 weight
// rows (8 + 8 + 1; Q4_Kx8 takes groups of eight: 16), prompt-order rows none and all.
TEST(GemmKernels, KQuantTilesEqualTheScalarKernelsOnExtremeBytes) {
  if (!quant::cpu_has_avx2()) GTEST_SKIP() << "no AVX2 on this CPU: Q6_K and Q5_K take their scalar vec_dots";
  const int64_t k = 512, max_m = 70;
  const int64_t act_rows[] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 11, 12, 16, 31, 63, 64, 65, max_m};
  std::mt19937 rng(7);
  auto byte = [&] { return static_cast<uint8_t>(rng()); };
  auto scale = [&] {
    return f32_to_f16(std::ldexp(1.0f + static_cast<float>(rng() % 1024) / 1024, -8 - int(rng() % 4)));
  };
  const int64_t nsb = k / 256;
  std::vector<quant::BlockQ8_K> act(static_cast<size_t>(max_m * nsb));
  for (size_t b = 0; b < act.size(); ++b) {
    quant::BlockQ8_K& a = act[b];
    a.d = std::ldexp(1.0f + static_cast<float>(rng() % 4096) / 4096, -7);
    const int mode = static_cast<int>(b % 3);  // random levels, all -128, all 127
    for (int e = 0; e < 256; ++e) a.qs[e] = static_cast<int8_t>(mode == 0 ? byte() : mode == 1 ? 0x80 : 0x7F);
    for (int j = 0; j < 16; ++j) {
      int sum = 0;
      for (int e = 16 * j; e < 16 * j + 16; ++e) sum += a.qs[e];
      a.bsums[j] = static_cast<int16_t>(sum);
    }
  }
  const std::vector<uint8_t> acts(reinterpret_cast<const uint8_t*>(act.data()),
                                  reinterpret_cast<const uint8_t*>(act.data() + act.size()));
  for (const TileCase& c : tile_cases()) {
    if (c.type != DType::Q6_K && c.type != DType::Q5_K && c.type != DType::Q4_K && c.type != DType::Q3_K &&
        c.type != DType::Q2_K)
      continue;
    const int64_t n_rows = c.layout == TensorLayout::Q4_Kx8 ? 16 : 17;
    std::vector<uint8_t> w(static_cast<size_t>(n_rows) * row_size(c.type, k));
    for (uint8_t& b : w) b = byte();
    for (int64_t i = 0; i < n_rows * nsb; ++i) {
      if (c.type == DType::Q6_K) {
        auto& blk = reinterpret_cast<quant::BlockQ6_K*>(w.data())[i];
        blk.d = scale();
        if (i % 2 == 0) std::memset(blk.scales, 0x80, sizeof(blk.scales));  // -128 everywhere
      } else if (c.type == DType::Q5_K) {
        auto& blk = reinterpret_cast<quant::BlockQ5_K*>(w.data())[i];
        blk.d = scale();
        blk.dmin = scale();
      } else if (c.type == DType::Q3_K) {
        reinterpret_cast<quant::BlockQ3_K*>(w.data())[i].d = scale();
      } else if (c.type == DType::Q2_K) {
        auto& blk = reinterpret_cast<quant::BlockQ2_K*>(w.data())[i];
        blk.d = scale();
        blk.dmin = scale();
      } else {
        auto& blk = reinterpret_cast<quant::BlockQ4_K*>(w.data())[i];
        blk.d = scale();
        blk.dmin = scale();
        if (i % 2 == 0) std::memset(blk.scales, 0xFF, sizeof(blk.scales));  // every scale and min 63
      }
    }
    size_t w_stride = row_size(c.type, k);
    if (c.layout != TensorLayout::Plain) {
      const TensorView v = contiguous_view(c.type, {k, n_rows, 1, 1}, w.data());
      std::vector<uint8_t> prepared(gemm::prepared_bytes(v, c.layout));
      gemm::prepare(v, c.layout, prepared.data());
      w_stride = prepared.size() / static_cast<size_t>(n_rows / 8);
      w = std::move(prepared);
    }
    for (int64_t m : act_rows) {
      for (int64_t n_gemm : {int64_t{0}, m}) {
        const auto want = run_tile(c.scalar, c, w, w_stride, n_rows, k, acts,
                                   static_cast<size_t>(nsb) * sizeof(quant::BlockQ8_K), m, 1, n_gemm);
        for (const auto& [level, fn] : simd_levels(c)) {
          const auto got = run_tile(fn, c, w, w_stride, n_rows, k, acts,
                                    static_cast<size_t>(nsb) * sizeof(quant::BlockQ8_K), m, 1, n_gemm);
          ASSERT_EQ(std::memcmp(want.data(), got.data(), want.size() * sizeof(float)), 0)
              << c.name << " " << level << " m=" << m << " n_gemm_act=" << n_gemm;
        }
      }
    }
  }
}

// The float prompt families' scalar kernels and activation conversions (F32: the row itself).
struct FloatFamily {
  DType type;
  TileFn scalar;
  FromFloatFn convert;
};
std::vector<FloatFamily> float_families() {
  return {{DType::F16, gemm::gemm_f16, gemm::convert_act_f16_wide},
          {DType::BF16, gemm::gemm_bf16, gemm::convert_act_bf16_wide},
          {DType::F32, gemm::gemm_f32, quant_traits(DType::F32)->from_float}};
}

// tinyBLAS's order as its AVX-512F build runs it, from values whose sum depends on it: lane 0 gets
// 2^24 (value 0), then -2^24 (value 32), lane 8 gets 1 (value 8), so sixteen lanes give 1. Eight
// lanes (the AVX2 build) or one running sum would add the 1 to 2^24 first, where it rounds away,
// and give 0. The weights and activations are exact in all three types.
TEST(GemmKernels, TinyBlasOrderHasSixteenLanes) {
  const int64_t k = 48;
  std::vector<float> w(k, 0.0f), a(k, 1.0f);
  w[0] = 2048, a[0] = 8192;
  w[32] = -2048, a[32] = 8192;
  w[8] = 1;
  for (const auto& [type, scalar, convert] : float_families()) {
    std::vector<uint8_t> row(row_size(type, k));
    quantize_chunk(type, w.data(), row.data(), 1, k, nullptr);
    std::vector<float> act(static_cast<size_t>(k) * 2);
    convert(a.data(), act.data(), k);
    float out = -1;
    Tile t;
    t.type = type;
    t.k = k;
    t.w = reinterpret_cast<const char*>(row.data());
    t.n_rows = 1;
    t.act = reinterpret_cast<const char*>(act.data());
    t.n_act = 1;
    t.dst = &out;
    scalar(t);
    EXPECT_EQ(out, 1.0f) << dtype_name(type);
  }
}

// The AVX2 activation conversions of the F16 and BF16 families write the scalar ones' bytes, for
// values that round (ties, overflow, subnormals, NaNs with payloads) and row lengths that leave a
// tail.
TEST(GemmKernels, SimdActivationConversionsEqualTheScalarOnes) {
  if (!quant::cpu_has_avx2()) GTEST_SKIP() << "no AVX2 on this CPU";
  std::vector<float> x = random_floats(77, 3);
  const uint32_t bits[] = {0x7fc00001u, 0xffa00000u, 0x7f800001u, 0x7f800000u, 0xff800000u, 0x477ff000u,
                           0x477fefffu, 0x33800000u, 0x33000000u, 0x387fc000u, 0x3f808000u, 0x3f818000u,
                           0x3f80c000u, 0x00000001u, 0x80000000u, 0x7f7fffffu};
  for (size_t i = 0; i < std::size(bits); ++i) x[i * 3] = std::bit_cast<float>(bits[i]);
  for (const auto& [scalar, simd] :
       {std::pair<FromFloatFn, FromFloatFn>{gemm::convert_act_f16_wide, gemm::convert_act_f16_wide_avx2},
        std::pair<FromFloatFn, FromFloatFn>{gemm::convert_act_bf16_wide, gemm::convert_act_bf16_wide_avx2}}) {
    for (int64_t k : {int64_t{8}, int64_t{13}, int64_t{77}}) {
      std::vector<uint8_t> want(static_cast<size_t>(k) * 6, 0xAB), got(want.size(), 0xCD);
      scalar(x.data(), want.data(), k);
      simd(x.data(), got.data(), k);
      EXPECT_EQ(want, got) << "k=" << k;
    }
  }
  // The split families' 16-bit values in the split-steps order (k a multiple of 16).
  for (const auto& [scalar, simd] :
       {std::pair<FromFloatFn, FromFloatFn>{gemm::convert_act_f16_split16, gemm::convert_act_f16_split16_avx2},
        std::pair<FromFloatFn, FromFloatFn>{gemm::convert_act_bf16_split16,
                                            gemm::convert_act_bf16_split16_avx2}}) {
    for (int64_t k : {int64_t{16}, int64_t{64}}) {
      std::vector<uint8_t> want(static_cast<size_t>(k) * 2, 0xAB), got(want.size(), 0xCD);
      scalar(x.data(), want.data(), k);
      simd(x.data(), got.data(), k);
      EXPECT_EQ(want, got) << "split k=" << k;
    }
  }
}

// A split row holds the plain row's values at split16_pos; the split activations hold the plain
// ones' alike (the 16-bit copy of the wide format, F32 rows).
TEST(GemmKernels, SplitStepsLayoutMovesEachValueToItsPlace) {
  const int64_t k = 48;
  EXPECT_EQ(quant::split16_pos(0, k), 0);
  EXPECT_EQ(quant::split16_pos(7, k), 7);
  EXPECT_EQ(quant::split16_pos(8, k), 24);
  EXPECT_EQ(quant::split16_pos(16, k), 8);
  EXPECT_EQ(quant::split16_pos(47, k), 47);
  std::vector<float> x = random_floats(k, 9);
  std::vector<uint8_t> plain_w(row_size(DType::F16, k) * 2), split_w(plain_w.size());
  quantize_chunk(DType::F16, x.data(), plain_w.data(), 1, k, nullptr);
  quantize_chunk(DType::F16, x.data(), plain_w.data() + plain_w.size() / 2, 1, k, nullptr);
  gemm::prepare_split16(reinterpret_cast<const char*>(plain_w.data()), plain_w.size() / 2, 2, k, 2,
                        split_w.data());
  std::vector<float> wide(static_cast<size_t>(k) * 3 / 2 + 1), split_f32(k);
  std::vector<uint16_t> split_h(k);
  gemm::convert_act_f16_wide(x.data(), wide.data(), k);
  gemm::convert_act_f16_split16(x.data(), split_h.data(), k);
  gemm::convert_act_f32_split16(x.data(), split_f32.data(), k);
  const auto* ph = reinterpret_cast<const uint16_t*>(plain_w.data());
  const auto* sh = reinterpret_cast<const uint16_t*>(split_w.data());
  const auto* wide_h = reinterpret_cast<const uint16_t*>(wide.data() + k);
  for (int64_t e = 0; e < k; ++e) {
    const int64_t p = quant::split16_pos(e, k);
    EXPECT_EQ(sh[p], ph[e]) << e;
    EXPECT_EQ(sh[k + p], ph[k + e]) << e;  // the second row, in its own place
    EXPECT_EQ(split_h[static_cast<size_t>(p)], wide_h[e]) << e;
    EXPECT_EQ(split_f32[static_cast<size_t>(p)], x[static_cast<size_t>(e)]) << e;
  }
}

// The split vec_dots give their plain counterparts' bits (scalar: the portable ones; AVX2: the
// AVX2 ones), over lengths with and without leftovers past the 64- and 32-value steps.
TEST(GemmKernels, SplitVecDotsEqualThePlainOnes) {
  using HalfDot = void (*)(int64_t, float*, const uint16_t*, const uint16_t*);
  using FloatDot = void (*)(int64_t, float*, const float*, const float*);
  std::vector<std::pair<HalfDot, HalfDot>> f16 = {{quant::vec_dot_f16, quant::vec_dot_f16_split16}};
  std::vector<std::pair<HalfDot, HalfDot>> bf16 = {{quant::vec_dot_bf16, quant::vec_dot_bf16_split16}};
  std::vector<std::pair<FloatDot, FloatDot>> f32 = {{quant::vec_dot_f32, quant::vec_dot_f32_split16}};
  if (quant::cpu_has_avx2()) {
    f16.emplace_back(quant::vec_dot_f16_avx2, quant::vec_dot_f16_split16_avx2);
    bf16.emplace_back(quant::vec_dot_bf16_avx2, quant::vec_dot_bf16_split16_avx2);
    f32.emplace_back(quant::vec_dot_f32_avx2, quant::vec_dot_f32_split16_avx2);
  }
  for (int64_t k : {16, 48, 64, 80, 112, 2064}) {
    const std::vector<float> x = random_floats(k, static_cast<uint32_t>(k)), y = random_floats(k, 3);
    auto split = [&](const void* row, size_t value_bytes) {
      std::vector<uint8_t> out(static_cast<size_t>(k) * value_bytes);
      gemm::prepare_split16(static_cast<const char*>(row), out.size(), 1, k, value_bytes, out.data());
      return out;
    };
    std::vector<uint16_t> xh(static_cast<size_t>(k)), yh(xh.size());
    for (const auto& [dots, to_half] :
         {std::pair{&f16, &f32_to_f16_row}, std::pair{&bf16, &f32_to_bf16_row}}) {
      to_half(x.data(), xh.data(), k);
      to_half(y.data(), yh.data(), k);
      const std::vector<uint8_t> xs = split(xh.data(), 2), ys = split(yh.data(), 2);
      for (const auto& [plain, split_dot] : *dots) {
        float want = 0, got = 1;
        plain(k, &want, xh.data(), yh.data());
        split_dot(k, &got, reinterpret_cast<const uint16_t*>(xs.data()),
                  reinterpret_cast<const uint16_t*>(ys.data()));
        EXPECT_EQ(std::bit_cast<uint32_t>(want), std::bit_cast<uint32_t>(got)) << "k=" << k;
      }
    }
    const std::vector<uint8_t> xs = split(x.data(), 4), ys = split(y.data(), 4);
    for (const auto& [plain, split_dot] : f32) {
      float want = 0, got = 1;
      plain(k, &want, x.data(), y.data());
      split_dot(k, &got, reinterpret_cast<const float*>(xs.data()),
                reinterpret_cast<const float*>(ys.data()));
      EXPECT_EQ(std::bit_cast<uint32_t>(want), std::bit_cast<uint32_t>(got)) << "f32 k=" << k;
    }
  }
}

// The split families' kernels for the one-row order over several activation rows
// (split16_rows_avx2.cpp): every output the bits of the type's split vec_dot, for 1 to 16
// activation rows starting at row 0 or later (rows before the first untouched), an odd number of
// weight rows, and row lengths that end with the vec_dot's main loop (the reduction done in the
// kernel) or leave every tail it handles apart (k below one step, 16, 32 and 48 values past it).
TEST(GemmKernels, SplitRowsKernelsGiveEveryRowItsVecDotsBits) {
  if (!quant::cpu_has_avx2()) GTEST_SKIP() << "no AVX2 on this CPU: the split rows take their scalar vec_dots";
  using RowsFn = void (*)(const Tile&, int64_t);
  using Dot = float (*)(int64_t, const char*, const char*);
  struct Case {
    DType type;
    void (*convert)(const float*, void*, int64_t);
    Dot dot;
    std::vector<RowsFn> kernels;
  };
  std::vector<Case> cases = {
      {DType::F16, gemm::convert_act_f16_split16,
       [](int64_t n, const char* w, const char* a) {
         float s = 0;
         quant::vec_dot_f16_split16_avx2(n, &s, reinterpret_cast<const uint16_t*>(w),
                                         reinterpret_cast<const uint16_t*>(a));
         return s;
       },
       {gemm::rows_f16_split16_avx2}},
      {DType::BF16, gemm::convert_act_bf16_split16,
       [](int64_t n, const char* w, const char* a) {
         float s = 0;
         quant::vec_dot_bf16_split16_avx2(n, &s, reinterpret_cast<const uint16_t*>(w),
                                          reinterpret_cast<const uint16_t*>(a));
         return s;
       },
       {gemm::rows_bf16_split16_avx2}},
      {DType::F32, gemm::convert_act_f32_split16,
       [](int64_t n, const char* w, const char* a) {
         float s = 0;
         quant::vec_dot_f32_split16_avx2(n, &s, reinterpret_cast<const float*>(w),
                                         reinterpret_cast<const float*>(a));
         return s;
       },
       {gemm::rows_f32_split16_avx2}},
  };
  const int64_t n_rows = 5, max_m = 16;
  uint32_t seed = 700;
  for (const Case& c : cases) {
    const size_t value_bytes = type_size(c.type);
    for (int64_t k : {16, 48, 64, 80, 96, 112, 128, 208, 2048, 2096}) {
      // Weights whose rows differ in scale by 2^10, so that sums depend on their order.
      std::vector<float> wv = random_floats(n_rows * k, ++seed);
      for (size_t e = 0; e < wv.size(); e += 7) wv[e] *= 1024;
      std::vector<uint8_t> plain(static_cast<size_t>(n_rows) * row_size(c.type, k));
      quantize_chunk(c.type, wv.data(), plain.data(), n_rows, k, nullptr);
      std::vector<uint8_t> w(plain.size());
      gemm::prepare_split16(reinterpret_cast<const char*>(plain.data()), row_size(c.type, k), n_rows, k,
                            value_bytes, w.data());
      const size_t act_stride = static_cast<size_t>(k) * value_bytes + 16;  // padded apart
      const std::vector<float> x = random_floats(max_m * k, ++seed);
      std::vector<uint8_t> act(static_cast<size_t>(max_m) * act_stride, 0xAB);
      for (int64_t r = 0; r < max_m; ++r) c.convert(x.data() + r * k, act.data() + r * act_stride, k);
      for (RowsFn kernel : c.kernels)
        for (int64_t r0 : {0, 3})
          for (int64_t m = r0 + 1; m <= max_m; ++m) {
            const size_t row_stride = n_rows + 3;  // outputs of an activation row, padded apart
            std::vector<float> out(static_cast<size_t>(max_m) * row_stride, -7.0f);
            Tile t;
            t.type = c.type;
            t.k = k;
            t.w = reinterpret_cast<const char*>(w.data());
            t.w_stride = row_size(c.type, k);
            t.n_rows = n_rows;
            t.act = reinterpret_cast<const char*>(act.data());
            t.act_stride = act_stride;
            t.n_act = m;
            t.dst = out.data();
            t.dst_row_stride = row_stride * sizeof(float);
            t.dst_col_stride = sizeof(float);
            kernel(t, r0);
            for (int64_t r = 0; r < max_m; ++r)
              for (int64_t i = 0; i < static_cast<int64_t>(row_stride); ++i) {
                const float got = out[static_cast<size_t>(r) * row_stride + static_cast<size_t>(i)];
                const bool computed = r >= r0 && r < m && i < n_rows;
                const float want =
                    computed ? c.dot(k, t.w + static_cast<size_t>(i) * t.w_stride, t.act + static_cast<size_t>(r) * act_stride)
                             : -7.0f;
                ASSERT_EQ(std::bit_cast<uint32_t>(got), std::bit_cast<uint32_t>(want))
                    << dtype_name(c.type) << " k=" << k << " rows " << r0 << ".." << m << ": output (" << r << ", "
                    << i << ")";
              }
          }
    }
  }
}

TEST(GemmKernels, PreparingIsAPureFunctionOfThePlainBytes) {
  for (const auto& [type, layout, k] : {std::tuple{DType::Q4_0, TensorLayout::Q4_0x8, int64_t{96}},
                                        std::tuple{DType::Q4_K, TensorLayout::Q4_Kx8, int64_t{512}},
                                        std::tuple{DType::Q8_0, TensorLayout::Q8_0x8, int64_t{96}},
                                        std::tuple{DType::F16, TensorLayout::Split16, int64_t{96}}}) {
    std::vector<uint8_t> plain = random_rows(type, 16, k, 7);
    const TensorView v = contiguous_view(type, {k, 16, 1, 1}, plain.data());
    std::vector<uint8_t> a(gemm::prepared_bytes(v, layout), 1), b(a.size(), 2);
    gemm::prepare(v, layout, a.data());
    gemm::prepare(v, layout, b.data());
    EXPECT_EQ(a, b) << dtype_name(type);
    EXPECT_EQ(a.size(), layout == TensorLayout::Q4_Kx8 ? plain.size() / 144 * 148 : plain.size());
  }
}

// F16, BF16 and F32 weights of tinyBLAS's shapes take the split-steps layout on AVX2 CPUs; rows
// that are not whole 16-value steps, or row counts off the 8-row groups, stay plain.
TEST(GemmKernels, FloatWeightsTakeTheSplitLayoutOnAvx2Cpus) {
  for (DType type : {DType::F16, DType::BF16, DType::F32}) {
    EXPECT_EQ(gemm::preferred_layout(contiguous_view(type, {64, 16, 1, 1}, nullptr)),
              quant::cpu_has_avx2() ? TensorLayout::Split16 : TensorLayout::Plain)
        << dtype_name(type);
    EXPECT_EQ(gemm::preferred_layout(contiguous_view(type, {72, 16, 1, 1}, nullptr)), TensorLayout::Plain);
    EXPECT_EQ(gemm::preferred_layout(contiguous_view(type, {64, 12, 1, 1}, nullptr)), TensorLayout::Plain);
    EXPECT_EQ(gemm::preferred_layout(contiguous_view(type, {64, 16, 2, 1}, nullptr)), TensorLayout::Plain);
  }
}

// Q8_0 weights holding the level -128 (never written by ggml's quantization, but a file may hold
// it) stay plain: the Q8_0x8 kernels cannot negate it. Without it, AVX2 CPUs prepare Q8_0x8.
TEST(GemmKernels, Q8_0WeightsWithTheLevelMinus128StayPlain) {
  std::vector<uint8_t> rows = random_rows(DType::Q8_0, 16, 64, 3);
  const TensorView v = contiguous_view(DType::Q8_0, {64, 16, 1, 1}, rows.data());
  EXPECT_EQ(gemm::preferred_layout(v), quant::cpu_has_avx2() ? TensorLayout::Q8_0x8 : TensorLayout::Plain);
  EXPECT_FALSE(gemm::q8_0_has_level_min(reinterpret_cast<const char*>(rows.data()), 34 * 2, 16, 64));
  // Levels next to it (-127, 127, 0, 1) are not it; -128 at any byte position is.
  auto* blocks = reinterpret_cast<quant::BlockQ8_0*>(rows.data());
  for (int8_t level : {-127, 127, 0, 1}) {
    blocks[2 * 5].qs[9] = level;
    EXPECT_FALSE(gemm::q8_0_has_level_min(reinterpret_cast<const char*>(rows.data()), 34 * 2, 16, 64))
        << +level;
  }
  for (int j : {0, 7, 8, 31}) {
    std::vector<uint8_t> with = rows;
    reinterpret_cast<quant::BlockQ8_0*>(with.data())[2 * 13 + 1].qs[j] = -128;  // row 13's block 1
    EXPECT_TRUE(gemm::q8_0_has_level_min(reinterpret_cast<const char*>(with.data()), 34 * 2, 16, 64)) << j;
    EXPECT_EQ(gemm::preferred_layout(contiguous_view(DType::Q8_0, {64, 16, 1, 1}, with.data())),
              TensorLayout::Plain);
  }
}

// mul_mat over weights as given, and over a copy in the family's prepared layout (forced, so the
// scalar kernels of the layouts run on CPUs without AVX2 too): identical bits, in ggml's orders
// (Q4_K: its prompt kernel's for the first m - m % 4 rows) and in the one-row order.
TEST(OpsMulMat, PreparedWeightsGiveThePlainWeightsBits) {
  std::mt19937 rng(5);
  for (const auto& [type, layout, k] : {std::tuple{DType::Q4_0, TensorLayout::Q4_0x8, int64_t{160}},
                                        std::tuple{DType::Q4_K, TensorLayout::Q4_Kx8, int64_t{512}},
                                        std::tuple{DType::Q4_K, TensorLayout::Q4_Kx8, int64_t{1280}},
                                        std::tuple{DType::Q8_0, TensorLayout::Q8_0x8, int64_t{2080}},
                                        std::tuple{DType::F16, TensorLayout::Split16, int64_t{2064}},
                                        std::tuple{DType::BF16, TensorLayout::Split16, int64_t{80}},
                                        std::tuple{DType::F32, TensorLayout::Split16, int64_t{1040}}}) {
    // Plain Q8_0 takes the AVX2 vec_dot's order on AVX2 CPUs only (elsewhere its own vec_dot's).
    if (type == DType::Q8_0 && !quant::cpu_has_avx2()) continue;
    for (int64_t m : {1, 3, 4, 5, 17, 70})
      for (bool single_row_order : {false, true}) {
        const int64_t n = 40;
        HostTensor w(type, {k, n, 1, 1});
        std::vector<float> wv(static_cast<size_t>(k * n));
        for (float& v : wv) v = std::uniform_real_distribution<float>(-1, 1)(rng);
        w.set_quantized(wv);
        HostTensor a(DType::F32, {k, m, 1, 1});
        a.fill_uniform(rng, -2, 2);
        HostTensor plain_out(DType::F32, {n, m, 1, 1}), prepared_out(DType::F32, {n, m, 1, 1});
        OpCall plain_call = make_call(OpKind::MulMat, plain_out, {&w, &a});
        plain_call.params.single_row_order = single_row_order;
        run_checked(plain_call, plain_out);
        std::vector<uint8_t> prepared(gemm::prepared_bytes(w.view(), layout));
        gemm::prepare(w.view(), layout, prepared.data());
        OpCall call = make_call(OpKind::MulMat, prepared_out, {&w, &a});
        call.src[0] = prepared_view(w.view(), {layout, prepared.size()}, prepared.data());
        call.params.single_row_order = single_row_order;
        run_checked(call, prepared_out);
        for (int64_t j = 0; j < m; ++j)
          ASSERT_EQ(
              std::memcmp(plain_out.row(j), prepared_out.row(j), static_cast<size_t>(n) * sizeof(float)), 0)
              << dtype_name(type) << " k=" << k << " m=" << m << " single_row_order=" << single_row_order
              << " row " << j;
      }
  }
}

// Float weights (F16, BF16, F32): products ggml sends through tinyBLAS (two rows or more, k a
// multiple of 16, a multiple of 4 weight rows) take its order (gemm_f16 / _bf16 / _f32), every other
// row the type's vec_dot's, as do all rows with single_row_order.
TEST(OpsMulMat, FloatPromptsTakeTinyBlasOrderAndTheRestTheVecDots) {
  if (!quant::cpu_has_avx2())
    GTEST_SKIP() << "no AVX2 on this CPU: every float row takes the vec_dot's order";
  std::mt19937 rng(12);
  struct Case {
    int64_t k, n, m;
    bool single_row_order, tinyblas;
  };
  const Case cases[] = {{64, 12, 5, false, true},  {2048, 16, 2, false, true}, {64, 12, 1, false, false},
                        {64, 12, 5, true, false},  {40, 12, 5, false, false},  {64, 6, 5, false, false},
                        {96, 20, 70, false, true}, {96, 20, 70, true, false}};
  for (const auto& [type, scalar, convert] : float_families()) {
    const QuantTraits* q = quant_traits(type);
    int n_orders_differ = 0;
    for (const Case& c : cases) {
      HostTensor w(type, {c.k, c.n, 1, 1});
      for (int64_t i = 0; i < c.n; ++i)
        for (int64_t e = 0; e < c.k; ++e)
          w.set(e, i, 0, 0, std::uniform_real_distribution<float>(-1, 1)(rng));
      HostTensor a(DType::F32, {c.k, c.m, 1, 1});
      a.fill_uniform(rng, -2, 2);
      HostTensor out(DType::F32, {c.n, c.m, 1, 1});
      OpCall call = make_call(OpKind::MulMat, out, {&w, &a});
      call.params.single_row_order = c.single_row_order;
      run_checked(call, out);
      std::vector<uint8_t> act(row_size(q->vec_dot_type, c.k));
      std::vector<float> wide(static_cast<size_t>(c.k) * 2);  // k floats, then (F16, BF16) k 16-bit values
      for (int64_t j = 0; j < c.m; ++j) {
        q->act_from_float(reinterpret_cast<const float*>(a.row(j)), act.data(), c.k);
        convert(reinterpret_cast<const float*>(a.row(j)), wide.data(), c.k);
        for (int64_t i = 0; i < c.n; ++i) {
          float tiny = 0, vec = 0;
          Tile t;
          t.type = type;
          t.k = c.k;
          t.w = reinterpret_cast<const char*>(w.row(i));
          t.n_rows = 1;
          t.act = reinterpret_cast<const char*>(wide.data());
          t.n_act = 1;
          t.dst = &tiny;
          if (c.k % 16 == 0) scalar(t);
          q->vec_dot(c.k, &vec, w.row(i), act.data());
          const float want = c.tinyblas ? tiny : vec;
          const float got = reinterpret_cast<const float*>(out.row(j))[i];
          n_orders_differ += c.k % 16 == 0 && std::memcmp(&tiny, &vec, sizeof(float)) != 0;
          ASSERT_EQ(std::memcmp(&got, &want, sizeof(float)), 0)
              << dtype_name(type) << " k=" << c.k << " n=" << c.n << " m=" << c.m
              << " single_row_order=" << c.single_row_order << " row " << j << " output " << i << ": " << got
              << " vs " << want;
        }
      }
    }
    EXPECT_GT(n_orders_differ, 0) << dtype_name(type)
                                  << ": the two orders never differed: the test cannot tell them apart";
  }
}

// The tile families in their types' AVX2 vec_dot order, for every batch size from 1 to 70 rows (the
// K-quant kernels' one-row path below 4 rows, groups of 4 and the rest, passes of 64): the AVX2
// kernel, the scalar kernel and the vec_dot give the same bits for every output, 13 weight rows
// (groups of 8 and 4, then single rows; pairs and a single row for the legacy types).
TEST(GemmKernels, VecDotTilesEqualTheVecDotsForEveryBatchSize) {
  if (!quant::cpu_has_avx2()) GTEST_SKIP() << "no AVX2 on this CPU: these types take their scalar vec_dots";
  uint32_t seed = 300;
  const int64_t n_rows = 13, max_m = 70;
  for (const TileCase& c : tile_cases()) {
    if (c.layout != TensorLayout::Plain || !info(c.type).quantized || c.type == DType::Q8_0) continue;
    const gemm::Family& fam = gemm::family_for(contiguous_view(c.type, {c.ks[0], n_rows, 1, 1}, nullptr));
    const QuantTraits* q = quant_traits(c.type);
    for (int64_t k : {c.ks[0], c.ks[1]}) {
      const std::vector<uint8_t> w = random_rows(c.type, n_rows, k, ++seed);
      const size_t w_stride = row_size(c.type, k);
      size_t a_stride = 0;
      const std::vector<uint8_t> act = converted(fam, max_m, k, ++seed, &a_stride);
      std::vector<float> want(static_cast<size_t>(max_m * n_rows));
      for (int64_t r = 0; r < max_m; ++r)
        for (int64_t i = 0; i < n_rows; ++i)
          q->vec_dot(k, &want[static_cast<size_t>(r * n_rows + i)], w.data() + i * w_stride,
                     act.data() + r * a_stride);
      const auto scalar = run_tile(c.scalar, c, w, w_stride, n_rows, k, act, a_stride, max_m, 1);
      ASSERT_EQ(std::memcmp(scalar.data(), want.data(), want.size() * sizeof(float)), 0)
          << c.name << " k=" << k;
      for (int64_t m = 1; m <= max_m; ++m) {
        const auto got = run_tile(c.simd, c, w, w_stride, n_rows, k, act, a_stride, m, 1);
        ASSERT_EQ(std::memcmp(got.data(), want.data(), got.size() * sizeof(float)), 0)
            << c.name << " k=" << k << " m=" << m;
      }
    }
  }
}

// Plain Q4_0 and IQ4_NL weights with a multiple of 8 rows take the rows8 family (ggml's repacked
// order), whose 8x4 tiles must give, for every batch size from 1 to 70 rows (tiles of four
// activation rows and the one-at-a-time rest) and any prompt-row count, the bits of the scalar
// reference dot product and of the per-output AVX2 kernel; outputs not one float apart (no tile)
// too. k of one block, several, and a long row; 8 and 24 weight rows.
TEST(GemmKernels, Rows8TilesEqualTheirDotsForEveryBatchSize) {
  if (!quant::cpu_has_avx2()) GTEST_SKIP() << "no AVX2 on this CPU: these types take their vec_dots";
  uint32_t seed = 500;
  const int64_t max_m = 70;
  for (const auto& [type, name] : {std::pair{DType::Q4_0, "q4_0"}, std::pair{DType::IQ4_NL, "iq4_nl"}}) {
    const TileCase c{name, type, TensorLayout::Plain, nullptr, nullptr, {}, {}};
    const QuantTraits* q = quant_traits(type);
    ASSERT_NE(q->vec_dot_rows8_x4_8x4, nullptr) << c.name;
    for (int64_t k : {32, 96, 2080}) {
      for (int64_t n_rows : {8, 24}) {
        const gemm::Family& fam = gemm::family_for(contiguous_view(type, {k, n_rows, 1, 1}, nullptr));
        ASSERT_STREQ(fam.name, "rows8") << c.name;
        const std::vector<uint8_t> w = random_rows(type, n_rows, k, ++seed);
        const size_t w_stride = row_size(type, k);
        size_t a_stride = 0;
        const std::vector<uint8_t> act = converted(fam, max_m, k, ++seed, &a_stride);
        std::vector<float> want(static_cast<size_t>(max_m * n_rows));
        for (int64_t r = 0; r < max_m; ++r) {
          for (int64_t i = 0; i < n_rows; ++i) {
            float& out = want[static_cast<size_t>(r * n_rows + i)];
            q->vec_dot_rows8_x4_ref(k, &out, w.data() + i * w_stride, act.data() + r * a_stride);
            float fast = 0;
            q->vec_dot_rows8_x4(k, &fast, w.data() + i * w_stride, act.data() + r * a_stride);
            ASSERT_EQ(std::bit_cast<uint32_t>(fast), std::bit_cast<uint32_t>(out)) << c.name << " k=" << k;
          }
        }
        for (int64_t m = 1; m <= max_m; ++m) {
          for (int64_t n_gemm : {int64_t{0}, m - m % 4, m}) {
            for (int col_stride : {1, 3}) {
              const auto got =
                  run_tile(fam.run, c, w, w_stride, n_rows, k, act, a_stride, m, col_stride, n_gemm);
              for (size_t o = 0; o < static_cast<size_t>(m * n_rows); ++o)
                ASSERT_EQ(std::bit_cast<uint32_t>(got[o * static_cast<size_t>(col_stride)]),
                          std::bit_cast<uint32_t>(want[o]))
                    << c.name << " k=" << k << " rows=" << n_rows << " m=" << m << " n_gemm_act=" << n_gemm
                    << " col_stride=" << col_stride << " output " << o;
            }
          }
        }
      }
    }
  }
}

// IQ4_XS on AVX2 CPUs: products ggml sends through its IQ panel gemm (8 activation rows or more,
// 2-D weights with a multiple of 8 rows) take the panel order in every row, every other product
// (and every row with single_row_order) the AVX2 vec_dot's.
TEST(OpsMulMat, Iq4XsPromptsTakeTheIqPanelOrderAndTheRestTheVecDots) {
  if (!quant::cpu_has_avx2()) GTEST_SKIP() << "no AVX2 on this CPU: IQ4_XS takes its scalar vec_dot";
  std::mt19937 rng(31);
  struct Case {
    int64_t k, n, m, w_planes, a_planes;  // a_planes a multiple of w_planes (broadcast)
    bool single_row_order, panel;
  };
  const Case cases[] = {
      {512, 24, 8, 1, 1, false, true},  {512, 24, 7, 1, 1, false, false},  {768, 40, 70, 1, 1, false, true},
      {768, 40, 70, 1, 1, true, false}, {512, 20, 9, 1, 1, false, false},  {256, 16, 9, 2, 2, false, false},
      {256, 16, 9, 1, 2, false, true},  {2304, 16, 13, 1, 1, false, true}, {256, 8, 1, 1, 1, false, false}};
  int n_orders_differ = 0;
  for (const Case& c : cases) {
    HostTensor w(DType::IQ4_XS, {c.k, c.n, c.w_planes, 1});
    std::vector<float> wv(static_cast<size_t>(c.k * c.n * c.w_planes));
    for (float& v : wv) v = std::uniform_real_distribution<float>(-1, 1)(rng);
    w.set_quantized(wv);
    HostTensor a(DType::F32, {c.k, c.m, c.a_planes, 1});
    a.fill_uniform(rng, -2, 2);
    HostTensor out(DType::F32, {c.n, c.m, c.a_planes, 1});
    OpCall call = make_call(OpKind::MulMat, out, {&w, &a});
    call.params.single_row_order = c.single_row_order;
    run_checked(call, out);
    std::vector<uint8_t> act(row_size(DType::Q8_K, c.k));
    for (int64_t p = 0; p < c.a_planes; ++p) {
      for (int64_t j = 0; j < c.m; ++j) {
        quant_traits(DType::Q8_K)->from_float(reinterpret_cast<const float*>(a.row(j, p)), act.data(), c.k);
        const auto* ar = reinterpret_cast<const quant::BlockQ8_K*>(act.data());
        for (int64_t i = 0; i < c.n; ++i) {
          const auto* wr =
              reinterpret_cast<const quant::BlockIQ4XS*>(w.row(i, p / (c.a_planes / c.w_planes)));
          float vec = 0;
          quant::vec_dot_iq4_xs_q8_K_avx2(c.k, &vec, wr, ar);
          const float panel = iq_panel_dot(c.k, wr, ar);
          const float want = c.panel ? panel : vec;
          const float got = reinterpret_cast<const float*>(out.row(j, p))[i];
          n_orders_differ += std::memcmp(&panel, &vec, sizeof(float)) != 0;
          ASSERT_EQ(std::memcmp(&got, &want, sizeof(float)), 0)
              << "k=" << c.k << " n=" << c.n << " m=" << c.m << " planes=" << c.w_planes << "/" << c.a_planes
              << " single_row_order=" << c.single_row_order << " plane " << p << " row " << j << " output "
              << i << ": " << got << " vs " << want;
        }
      }
    }
  }
  EXPECT_GT(n_orders_differ, 0) << "the two orders never differed: the test cannot tell them apart";
}

// The types of the vec_dot tile families (Q6_K, Q5_K, Q3_K, Q2_K, Q5_0, Q4_1, Q5_1) on AVX2 CPUs:
// every output of mul_mat, for one token, a small batch or a prompt (more activation rows than the
// K-quant kernels' pass of 64), is the AVX2 vec_dot's (one order for every batch size), so a
// row's logits do not depend on its batch even without single_row_order.
TEST(OpsMulMat, VecDotTypesTakeTheVecDotsOrderForEveryBatchSize) {
  if (!quant::cpu_has_avx2()) GTEST_SKIP() << "no AVX2 on this CPU: these types take their scalar vec_dots";
  std::mt19937 rng(21);
  for (DType type :
       {DType::Q6_K, DType::Q5_K, DType::Q3_K, DType::Q2_K, DType::Q5_0, DType::Q4_1, DType::Q5_1}) {
    const int64_t k = 768, n = 23;  // 23 rows: tiles of 16 and 7 (groups of 8 and 4, then single rows)
    HostTensor w(type, {k, n, 1, 1});
    std::vector<float> wv(static_cast<size_t>(k * n));
    for (float& v : wv) v = std::uniform_real_distribution<float>(-1, 1)(rng);
    w.set_quantized(wv);
    const QuantTraits* q = quant_traits(type);
    for (int64_t m : {1, 2, 5, 70}) {
      HostTensor a(DType::F32, {k, m, 1, 1});
      a.fill_uniform(rng, -2, 2);
      HostTensor out(DType::F32, {n, m, 1, 1});
      run_checked(make_call(OpKind::MulMat, out, {&w, &a}), out);
      std::vector<uint8_t> act(row_size(q->vec_dot_type, k));
      for (int64_t j = 0; j < m; ++j) {
        q->act_from_float(reinterpret_cast<const float*>(a.row(j)), act.data(), k);
        for (int64_t i = 0; i < n; ++i) {
          float want = 0;
          q->vec_dot(k, &want, w.row(i), act.data());  // the AVX2 vec_dot on AVX2 CPUs
          const float got = reinterpret_cast<const float*>(out.row(j))[i];
          ASSERT_EQ(std::memcmp(&got, &want, sizeof(float)), 0)
              << dtype_name(type) << " m=" << m << " row " << j << " output " << i << ": " << got << " vs "
              << want;
        }
      }
    }
  }
}

// With single_row_order, a row's outputs are the same bits whether it is multiplied alone, in any
// sub-batch or in the whole batch (what speculative decoding relies on).
TEST(OpsMulMat, ARowsResultDoesNotDependOnItsBatch) {
  const DType types[] = {DType::F32,  DType::F16,  DType::BF16, DType::Q4_0,   DType::Q4_1,
                         DType::Q5_0, DType::Q5_1, DType::Q8_0, DType::Q2_K,   DType::Q3_K,
                         DType::Q4_K, DType::Q5_K, DType::Q6_K, DType::IQ4_NL, DType::IQ4_XS};
  std::mt19937 rng(9);
  for (DType type : types) {
    const int64_t k = block_size(type) == 256 ? 512 : 96, n = 24, m = 19;
    HostTensor w(type, {k, n, 1, 1});
    std::vector<float> wv(static_cast<size_t>(k * n));
    for (float& v : wv) v = std::uniform_real_distribution<float>(-1, 1)(rng);
    if (info(type).quantized) {
      w.set_quantized(wv);
    } else {
      for (int64_t i = 0; i < n; ++i)
        for (int64_t e = 0; e < k; ++e) w.set(e, i, 0, 0, wv[static_cast<size_t>(i * k + e)]);
    }
    // Plain weights, and the prepared copy this CPU's kernels prefer (if any).
    const WeightPlacement place = choose_weight_layout(w.view());
    std::vector<uint8_t> prepared(place.bytes);
    ASSERT_TRUE(prepare_weight(w.view(), place, prepared.data()).ok());
    for (const TensorView& wview : {w.view(), prepared_view(w.view(), place, prepared.data())}) {
      HostTensor a(DType::F32, {k, m, 1, 1});
      a.fill_uniform(rng, -3, 3);
      HostTensor whole(DType::F32, {n, m, 1, 1});
      OpCall call = make_call(OpKind::MulMat, whole, {&w, &a});
      call.src[0] = wview;
      call.params.single_row_order = true;
      run_checked(call, whole);
      for (int64_t b = 1; b <= 16; ++b) {
        for (int64_t j0 = 0; j0 < m; j0 += b) {
          const int64_t len = std::min(b, m - j0);
          HostTensor part_a(DType::F32, {k, len, 1, 1}), part(DType::F32, {n, len, 1, 1});
          for (int64_t j = 0; j < len; ++j)
            std::memcpy(part_a.row(j), a.row(j0 + j), static_cast<size_t>(k) * 4);
          OpCall pc = make_call(OpKind::MulMat, part, {&w, &part_a});
          pc.src[0] = wview;
          pc.params.single_row_order = true;
          run_checked(pc, part);
          for (int64_t j = 0; j < len; ++j)
            ASSERT_EQ(std::memcmp(part.row(j), whole.row(j0 + j), static_cast<size_t>(n) * 4), 0)
                << dtype_name(type) << (wview.layout == TensorLayout::Plain ? " plain" : " prepared")
                << ": row " << j0 + j << " in batches of " << b;
        }
      }
    }
  }
}

}  // namespace
}  // namespace kiln::test
