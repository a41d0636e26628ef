// The flash-attention vector kernels (ops/quant/attention_vec.h) against their element forms,
// bit for bit.
#include "ops/quant/attention_vec.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <iterator>
#include <random>
#include <utility>
#include <vector>

#include "core/half.h"
#include "ops/quant/simd_math.h"

namespace kiln {
namespace {

// The one-query path's F16 accumulator over a run of keys (SIMD where the CPU has F16C) against
// the element formulas applied key after key, over lengths with and without a tail, values spanning
// subnormals to overflow, keys with and without a rescale, rows out of order and repeated.
TEST(AttentionVec, F16AccumulatorRunMatchesTheElementFormulaKeyAfterKey) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> exponent(-26.0f, 17.0f);
  auto random_f16 = [&] {
    const float mag = std::exp2(exponent(rng));
    return f32_to_f16(rng() % 2 ? mag : -mag);
  };
  const std::vector<float> weights = {0.0f, 1.0f, 0.3183099f, -2.5f, 1e-3f, 3000.0f};
  for (int64_t n : {1, 7, 8, 64, 67, 128, 136}) {
    const int64_t n_rows = 9;
    const size_t row_bytes = static_cast<size_t>(n + 5) * sizeof(uint16_t);
    std::vector<uint16_t> rows(static_cast<size_t>(n_rows) * (row_bytes / 2)), y(static_cast<size_t>(n));
    for (uint16_t& v : rows) v = random_f16();
    for (uint16_t& v : y) v = random_f16();
    std::vector<quant::F16Key> keys;
    for (int e = 0; e < 20; ++e) {
      keys.push_back({static_cast<int32_t>(rng() % n_rows),
                      e % 3 == 0 ? weights[rng() % weights.size()] : 1.0f, weights[rng() % weights.size()]});
    }
    for (size_t n_keys : {size_t{0}, size_t{1}, keys.size()}) {
      std::vector<uint16_t> got = y, want = y;
      quant::f16_mad_keys(static_cast<int64_t>(n_keys), keys.data(), n, got.data(),
                          reinterpret_cast<const char*>(rows.data()), row_bytes);
      for (size_t e = 0; e < n_keys; ++e) {
        const uint16_t* x = rows.data() + static_cast<size_t>(keys[e].row) * (row_bytes / 2);
        for (size_t i = 0; i < want.size(); ++i) {
          if (keys[e].scale != 1.0f) want[i] = f32_to_f16(f16_to_f32(want[i]) * keys[e].scale);
          want[i] = f32_to_f16(std::fma(f16_to_f32(x[i]), keys[e].weight, f16_to_f32(want[i])));
        }
      }
      for (size_t i = 0; i < want.size(); ++i)
        ASSERT_EQ(got[i], want[i]) << "n " << n << " keys " << n_keys << " i " << i;
    }
  }
}

// The tiled path's kernels against their element forms: the K tile transposed, one FMA chain per
// row in order of e, and y = fma(x, v, y) per element, for F16 and F32 rows, with and without SIMD-sized
// parts.
TEST(AttentionVec, TiledKernelsMatchTheElementFormula) {
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> dist(-2.0f, 2.0f);
  for (DType type : {DType::F16, DType::F32}) {
    for (int64_t dk : {8, 12, 64, 72, 136}) {
      const int64_t n_rows = 27;  // SIMD groups of 16 and 8 keys, then 3 more
      const size_t row_bytes = static_cast<size_t>(dk + 3) * (type == DType::F16 ? 2 : 4);
      std::vector<char> rows(static_cast<size_t>(n_rows) * row_bytes);
      std::vector<float> values(rows.size() / 2), q(static_cast<size_t>(dk));
      auto at = [&](int64_t j, int64_t e) -> float {
        const char* p = rows.data() + j * row_bytes;
        if (type == DType::F16) return f16_to_f32(reinterpret_cast<const uint16_t*>(p)[e]);
        return reinterpret_cast<const float*>(p)[e];
      };
      for (int64_t j = 0; j < n_rows; ++j) {
        char* p = rows.data() + j * row_bytes;
        for (int64_t e = 0; e < dk; ++e) {
          if (type == DType::F16) {
            reinterpret_cast<uint16_t*>(p)[e] = f32_to_f16(dist(rng));
          } else {
            reinterpret_cast<float*>(p)[e] = dist(rng);
          }
        }
      }
      // Every query count: each query's results as if alone.
      for (int nq = 1; nq <= quant::kMaxQueries; ++nq) {
        std::vector<std::vector<float>> qs(static_cast<size_t>(nq), std::vector<float>(q.size()));
        std::vector<std::vector<float>> outs(static_cast<size_t>(nq),
                                             std::vector<float>(static_cast<size_t>(n_rows)));
        std::vector<const float*> qp;
        std::vector<float*> op;
        for (int qi = 0; qi < nq; ++qi) {
          for (float& x : qs[static_cast<size_t>(qi)]) x = dist(rng);
          qp.push_back(qs[static_cast<size_t>(qi)].data());
          op.push_back(outs[static_cast<size_t>(qi)].data());
        }
        // q k^T through the transposed tile, as the tiled path takes it (its leading dimension
        // wider than the rows).
        const int64_t ld = n_rows + 5;
        std::vector<float> kt(static_cast<size_t>(dk * ld));
        quant::transpose_rows_f32(n_rows, dk, rows.data(), row_bytes, type, kt.data(), ld);
        for (int64_t j = 0; j < n_rows; ++j)
          for (int64_t e = 0; e < dk; ++e)
            ASSERT_EQ(kt[static_cast<size_t>(e * ld + j)], at(j, e)) << j << " " << e;
        quant::dot_cols_sequential(nq, n_rows, dk, kt.data(), ld, qp.data(), op.data());
        for (int qi = 0; qi < nq; ++qi) {
          for (int64_t j = 0; j < n_rows; ++j) {
            float want = 0.0f;
            for (int64_t e = 0; e < dk; ++e) want = std::fma(at(j, e), qp[static_cast<size_t>(qi)][e], want);
            ASSERT_EQ(std::bit_cast<uint32_t>(op[static_cast<size_t>(qi)][j]), std::bit_cast<uint32_t>(want))
                << dtype_name(type) << " dk " << dk << " row " << j << " query " << qi << " of " << nq;
          }
        }
        // The V side: every row's weight per query, some exactly 0 or none; zero weights skipped
        // (the flash path's masked keys) or applied (the plain path's mul_mat). An accumulator
        // starting at -0 shows the difference: fma(x, 0, -0) is +0 for x > 0.
        for (auto [zeros, skip] : {std::pair{true, true}, std::pair{true, false}, std::pair{false, true}}) {
          std::vector<std::vector<float>> p(static_cast<size_t>(nq)), acc(static_cast<size_t>(nq)),
              want(static_cast<size_t>(nq));
          std::vector<const float*> pp;
          std::vector<float*> ap;
          for (int qi = 0; qi < nq; ++qi) {
            auto& pq = p[static_cast<size_t>(qi)];
            pq.resize(static_cast<size_t>(n_rows));
            for (size_t j = 0; j < pq.size(); ++j)
              pq[j] = zeros && (j + static_cast<size_t>(qi)) % 4 == 2 ? 0.0f : dist(rng);
            acc[static_cast<size_t>(qi)].resize(static_cast<size_t>(dk));
            for (float& a : acc[static_cast<size_t>(qi)]) a = dist(rng);
            acc[static_cast<size_t>(qi)][0] = -0.0f;
            want[static_cast<size_t>(qi)] = acc[static_cast<size_t>(qi)];
            pp.push_back(pq.data());
            ap.push_back(acc[static_cast<size_t>(qi)].data());
          }
          quant::f32_mad_rows(nq, n_rows, dk, ap.data(), rows.data(), row_bytes, type, pp.data(), skip);
          for (int qi = 0; qi < nq; ++qi) {
            for (int64_t i = 0; i < dk; ++i) {
              float& w = want[static_cast<size_t>(qi)][static_cast<size_t>(i)];
              for (int64_t j = 0; j < n_rows; ++j) {
                const float pj = pp[static_cast<size_t>(qi)][j];
                if (pj != 0.0f || !skip) w = std::fma(at(j, i), pj, w);
              }
              ASSERT_EQ(std::bit_cast<uint32_t>(ap[static_cast<size_t>(qi)][i]), std::bit_cast<uint32_t>(w))
                  << dtype_name(type) << " dk " << dk << " i " << i << " query " << qi << " of " << nq;
            }
          }
        }
      }
    }
  }
}

// The tiled path's scores and softmax sums against their element forms: w * scale + mask value (a
// product, then a sum; -inf where the mask value is -inf) with the largest value, NaNs ignored; the
// visible keys' bits; chunks of 16 reduced pairwise, added in double.
TEST(AttentionVec, ScoreScalingAndChunkSumsMatchTheElementFormulas) {
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> dist(-40.0f, 40.0f);
  for (int64_t n : {0, 1, 7, 8, 16, 23, 64}) {
    std::vector<float> w(static_cast<size_t>(n));
    for (float& x : w) x = dist(rng);
    if (n > 5) w[5] = NAN;
    if (n > 9) w[9] = INFINITY;
    // A causal row's mask (0 up to a key, -inf after), a padded cache's holes, ALiBi-like values, and
    // NaN mask values (visible: only -inf hides a key).
    std::vector<std::vector<float>> masks(4, std::vector<float>(static_cast<size_t>(n), 0.0f));
    for (int64_t i = 0; i < n; ++i) {
      const auto u = static_cast<size_t>(i);
      masks[1][u] = i > n / 2 ? -INFINITY : 0.0f;
      masks[2][u] = rng() % 3 == 0 ? -INFINITY : -0.5f * static_cast<float>(i);
      masks[3][u] = i % 4 == 1 ? NAN : (i % 4 == 2 ? -INFINITY : 1.5f);
    }
    for (const std::vector<float>& mv : masks) {
      std::vector<float> got = w;
      const float max = quant::scale_add_mask_max(n, got.data(), 0.125f, mv.data());
      float want_max = -INFINITY;
      uint64_t want_bits = 0;
      for (size_t i = 0; i < w.size(); ++i) {
        if (mv[i] != -INFINITY) want_bits |= uint64_t{1} << i;
        const float want = mv[i] == -INFINITY ? -INFINITY : w[i] * 0.125f + mv[i];
        if (std::isnan(want)) {
          ASSERT_TRUE(std::isnan(got[i])) << "n " << n << " i " << i;
          continue;
        }
        ASSERT_EQ(std::bit_cast<uint32_t>(got[i]), std::bit_cast<uint32_t>(want)) << "n " << n << " i " << i;
        want_max = std::max(want_max, want);
      }
      EXPECT_EQ(max, want_max) << "n " << n;
      EXPECT_EQ(quant::visible_bits(n, mv.data()), want_bits) << "n " << n;
    }
    for (float& x : w) x = std::exp(dist(rng) / 8.0f);
    double want = 0.0;
    for (int64_t c = 0; c < n; c += 16) {
      float v[16] = {}, h[8], q[4];
      for (int64_t i = c; i < std::min(n, c + 16); ++i) v[i - c] = w[static_cast<size_t>(i)];
      for (int i = 0; i < 8; ++i) h[i] = v[8 + i] + v[i];
      for (int i = 0; i < 4; ++i) q[i] = h[4 + i] + h[i];
      want += static_cast<double>((q[0] + q[2]) + (q[1] + q[3]));
    }
    EXPECT_EQ(std::bit_cast<uint64_t>(quant::sum_chunks16(n, w.data())), std::bit_cast<uint64_t>(want))
        << "n " << n;
  }
}

// The softmax numerators against expf_ggml_avx512 element by element: ordinary values, results
// that are subnormal or overflow, beyond |n| > 192, infinities and NaN.
TEST(AttentionVec, ShiftedExpMatchesTheElementFormula) {
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> dist(-110.0f, 95.0f);
  std::vector<float> w(1003);
  for (float& x : w) x = dist(rng);
  const float specials[] = {0.0f,  -0.0f,   1e-30f, -87.5f,  -103.9f,  -104.5f,   88.7f,
                            89.0f, -150.0f, 300.0f, -300.0f, INFINITY, -INFINITY, NAN};
  for (size_t i = 0; i < std::size(specials); ++i) w[3 + 5 * i] = specials[i];
  for (float max : {0.0f, 3.5f, -20.0f}) {
    std::vector<float> got = w;
    quant::exp_shifted_ggml(static_cast<int64_t>(got.size()), got.data(), max);
    for (size_t i = 0; i < w.size(); ++i) {
      const float want = quant::expf_ggml_avx512(w[i] - max);
      if (std::isnan(want)) {
        EXPECT_TRUE(std::isnan(got[i])) << "x " << w[i] << " max " << max;
      } else {
        ASSERT_EQ(std::bit_cast<uint32_t>(got[i]), std::bit_cast<uint32_t>(want))
            << "x " << w[i] << " max " << max << ": " << got[i] << " vs " << want;
      }
    }
  }
}

}  // namespace
}  // namespace kiln
