// The kernel of the IQ4_XS family (layouts.h), written once for AVX2 and AVX-512 VNNI,
// bit-identical to gemm_iq4_xs at both levels. The panel-order rows
// (the first Tile::n_gemm_act): per group of up to eight weight rows and super-block, the levels are
// decoded once to int8 and transposed into a panel whose vectors hold four values of each of the
// eight rows (row i in 32-bit lane i), kept in L1 while every activation row of the tile meets it;
// lane i then sums row i's exact integer super-block sum, and one FMA per super-block adds it, as
// the scalar kernel (no horizontal reductions). The other rows call the vec_dot (vec_dots_simd.h: the
// AVX2 order by definition; one-token decode keeps today's kernel). The integer steps are
// int_steps_simd.h's, exact at both levels. Include only from iq4_xs_tiles_avx2.cpp and
// iq4_xs_tiles_avx512.cpp (internal linkage).
#pragma once

#include <immintrin.h>

#include <algorithm>
#include <cstdint>

#include "ops/gemm/avx2_util.h"
#include "ops/gemm/layouts.h"
#include "ops/quant/int_steps_simd.h"
#include "ops/quant/kernels.h"
#include "ops/quant/vec_dots_simd.h"

namespace kiln::gemm {
namespace {  // NOLINT: internal linkage on purpose (see above)

constexpr int64_t kActChunk = 64;  // activation rows whose accumulators a pass keeps

// One super-block of up to eight weight rows (absent rows are zeros: they add nothing).
struct Panel {
  __m256i w[64];      // w[8 ib + m], lane i: values 32 ib + 4m .. 32 ib + 4m + 3 of row i (levels)
  __m256i mag[64];    // their magnitudes (vpmaddubsw's unsigned operand)
  __m256i scales[8];  // lane i: row i's signed scale of sub-block ib, in both 16-bit halves
  __m256 d;           // lane i: row i's super-block scale
};

// Eight 8x32-bit rows v[i] transposed in place: afterwards lane i of v[m] is lane m of the old v[i].
inline void transpose8x8(__m256i v[8]) {
  __m256i a[8], b[8];
  for (int j = 0; j < 4; ++j) {
    a[2 * j] = _mm256_unpacklo_epi32(v[2 * j], v[2 * j + 1]);
    a[2 * j + 1] = _mm256_unpackhi_epi32(v[2 * j], v[2 * j + 1]);
  }
  for (int h = 0; h < 2; ++h) {  // rows 4h .. 4h + 3
    b[4 * h + 0] = _mm256_unpacklo_epi64(a[4 * h], a[4 * h + 2]);
    b[4 * h + 1] = _mm256_unpackhi_epi64(a[4 * h], a[4 * h + 2]);
    b[4 * h + 2] = _mm256_unpacklo_epi64(a[4 * h + 1], a[4 * h + 3]);
    b[4 * h + 3] = _mm256_unpackhi_epi64(a[4 * h + 1], a[4 * h + 3]);
  }
  for (int m = 0; m < 4; ++m) {
    v[m] = _mm256_permute2x128_si256(b[m], b[4 + m], 0x20);
    v[4 + m] = _mm256_permute2x128_si256(b[m], b[4 + m], 0x31);
  }
}

// The signed scale (-32..31) of sub-block ib.
inline int scale_of(const quant::BlockIQ4XS& b, int ib) {
  return static_cast<int>(((b.scales_l[ib / 2] >> (4 * (ib % 2))) & 0xF) | ((b.scales_h >> (2 * ib)) & 3)
                                                                               << 4) -
         32;
}

// Super-block s of rows[0 .. n - 1] into p.
inline void decode(const quant::BlockIQ4XS* const rows[8], int n, int64_t s, Panel& p) {
  const __m128i lut = _mm_loadu_si128(reinterpret_cast<const __m128i*>(quant::kValuesIQ4NL));
  const __m128i low4 = _mm_set1_epi8(0x0F);
  for (int ib = 0; ib < 8; ++ib) {
    __m256i v[8];
    for (int i = 0; i < 8; ++i) {
      if (i >= n) {
        v[i] = _mm256_setzero_si256();
        continue;
      }
      // Values 0..15 of the sub-block (low nibbles), then 16..31 (high nibbles).
      const __m128i q = _mm_loadu_si128(reinterpret_cast<const __m128i*>(rows[i][s].qs + 16 * ib));
      const __m128i lo = _mm_shuffle_epi8(lut, _mm_and_si128(q, low4));
      const __m128i hi = _mm_shuffle_epi8(lut, _mm_and_si128(_mm_srli_epi16(q, 4), low4));
      v[i] = _mm256_set_m128i(hi, lo);
    }
    transpose8x8(v);
    for (int m = 0; m < 8; ++m) {
      p.w[8 * ib + m] = v[m];
      p.mag[8 * ib + m] = _mm256_abs_epi8(v[m]);
    }
  }
  alignas(32) int32_t sc[8][8] = {};
  alignas(16) uint16_t d[8] = {};
  for (int i = 0; i < n; ++i) {
    for (int ib = 0; ib < 8; ++ib) {
      const auto ls = static_cast<uint16_t>(static_cast<int16_t>(scale_of(rows[i][s], ib)));
      sc[ib][i] = static_cast<int32_t>(ls | static_cast<uint32_t>(ls) << 16);
    }
    d[i] = rows[i][s].d;
  }
  for (int ib = 0; ib < 8; ++ib) p.scales[ib] = _mm256_load_si256(reinterpret_cast<const __m256i*>(sc[ib]));
  p.d = _mm256_cvtph_ps(_mm_load_si128(reinterpret_cast<const __m128i*>(d)));
}

// acc[r] (lane i: row i) += the panel's super-block against activation blocks a[r], r < NR.
// vpmaddubsw of |w| and a signed as w: pairs of products of magnitudes <= 127 (Q8_K levels are
// -128..127), within int16; vpmaddwd by the scale pair then sums each pair, exactly
// (quant::scaled_dots_add: on VNNI the same exact sums by vpdpbusd, scaled once per sub-block).
template <int NR>
inline void panel_dot(const Panel& p, const quant::BlockQ8_K* const a[NR], __m256 acc[NR]) {
  __m256i sum[NR];
  for (int r = 0; r < NR; ++r) sum[r] = _mm256_setzero_si256();
  for (int ib = 0; ib < 8; ++ib) {
    const __m256i sc = p.scales[ib];
#pragma GCC unroll 4
    for (int r = 0; r < NR; ++r) {
      __m256i signed_a[8];  // the activations of sub-block ib with the levels' signs
#pragma GCC unroll 8
      for (int m = 0; m < 8; ++m)
        signed_a[m] = _mm256_sign_epi8(broadcast4(a[r]->qs + 32 * ib + 4 * m), p.w[8 * ib + m]);
      sum[r] = quant::scaled_dots_add<8>(sum[r], p.mag + 8 * ib, signed_a, sc);
    }
  }
  for (int r = 0; r < NR; ++r)
    acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sum[r]), _mm256_mul_ps(p.d, _mm256_broadcast_ss(&a[r]->d)),
                             acc[r]);
}

// Activation rows 0 .. n_act - 1 of the tile in the panel order.
inline void panel_rows(const Tile& t, int64_t n_act) {
  const int64_t nsb = t.k / 256;
  for (int64_t r0 = 0; r0 < n_act; r0 += kActChunk) {
    const int64_t nr = std::min(kActChunk, n_act - r0);
    for (int64_t i0 = 0; i0 < t.n_rows; i0 += 8) {
      const int n = static_cast<int>(std::min<int64_t>(8, t.n_rows - i0));
      const quant::BlockIQ4XS* rows[8] = {};
      for (int i = 0; i < n; ++i)
        rows[i] = reinterpret_cast<const quant::BlockIQ4XS*>(t.w + static_cast<size_t>(i0 + i) * t.w_stride);
      __m256 acc[kActChunk];
      for (int64_t r = 0; r < nr; ++r) acc[r] = _mm256_setzero_ps();
      for (int64_t s = 0; s < nsb; ++s) {
        Panel p;
        decode(rows, n, s, p);
        for_act_groups(nr, [&]<int NR>(int64_t r) {
          const quant::BlockQ8_K* a[NR];
          for (int j = 0; j < NR; ++j)
            a[j] = reinterpret_cast<const quant::BlockQ8_K*>(t.act +
                                                             static_cast<size_t>(r0 + r + j) * t.act_stride) +
                   s;
          panel_dot<NR>(p, a, acc + r);
        });
      }
      for (int64_t r = 0; r < nr; ++r) {
        if (n == 8) {
          store_rows8(t, r0 + r, i0, acc[r]);
          continue;
        }
        alignas(32) float out[8];
        _mm256_store_ps(out, acc[r]);
        for (int i = 0; i < n; ++i) store1(t, r0 + r, i0 + i, out[i]);
      }
    }
  }
}

inline void iq4_xs_tile(const Tile& t) {
  const int64_t n_panel = std::min(t.n_gemm_act, t.n_act);
  panel_rows(t, n_panel);
  for (int64_t r = n_panel; r < t.n_act; ++r) {
    const auto* a = reinterpret_cast<const quant::BlockQ8_K*>(t.act + static_cast<size_t>(r) * t.act_stride);
    for (int64_t i = 0; i < t.n_rows; ++i)
      quant::dot_iq4_xs_q8_K(
          t.k, out_ptr(t, r, i),
          reinterpret_cast<const quant::BlockIQ4XS*>(t.w + static_cast<size_t>(i) * t.w_stride), a);
  }
}

}  // namespace
}  // namespace kiln::gemm
