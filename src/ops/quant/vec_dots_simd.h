// The x86 dot products of the types whose integer step is a byte product (the legacy Q4_1, Q5_0, Q5_1 and
// IQ4_NL (also its *_rows8 order and 8x4 tile), the K-quants Q2_K .. Q6_K, IQ4_XS), written once over
// int_steps_simd.h: a file compiled for AVX2 gets ggml's AVX2 sequences, one compiled for AVX-512 VNNI gets
// vpdpbusd and vpdpwssd. The integer lanes are exact and every float operation is the same at both levels,
// so both give the same bits (kernels.h's vec_dot_*_avx2 and _avx512 are these functions). The int32 sums
// of a super-block are kept in a few independent chains (VNNI's fused multiply-adds would otherwise wait on
// each other) and added at the end; the lanes are exact, so the grouping does not change them. Each stays a
// function of its own (noinline): inlined into the tiles' one-row loops, the IQ4_XS one lost 18% of its
// decode speed. Include only from files compiled for AVX2 or wider; internal linkage (see
// int_steps_simd.h).
#pragma once

#include <immintrin.h>

#include <cmath>
#include <cstddef>
#include <cstdint>

#include "ops/quant/int_steps_simd.h"
#include "ops/quant/k_quants_avx2.h"
#include "ops/quant/kernels.h"
#include "ops/quant/legacy_avx2.h"
#include "ops/quant/prefetch.h"
#include "ops/quant/q4_0_lanes_avx2.h"

namespace kiln::quant {
namespace {  // NOLINT: internal linkage on purpose (see above)

// No inline functions from other headers are used here (core/half.h not included): a copy compiled
// for AVX2 could be the one the linker keeps for callers on older CPUs. F16 loads use F16C directly.
inline float f16_to_f32(uint16_t h) { return _cvtsh_ss(h); }

inline __m256i load256(const void* p) { return _mm256_loadu_si256(static_cast<const __m256i*>(p)); }

inline float hsum_float_8(__m256 x) {
  __m128 res = _mm256_extractf128_ps(x, 1);
  res = _mm_add_ps(res, _mm256_castps256_ps128(x));
  res = _mm_add_ps(res, _mm_movehl_ps(res, res));
  res = _mm_add_ss(res, _mm_movehdup_ps(res));
  return _mm_cvtss_f32(res);
}

// Horizontal sum of 4 float lanes.
inline float hsum_float_4(__m128 x) {
  x = _mm_add_ps(x, _mm_movehl_ps(x, x));
  x = _mm_add_ss(x, _mm_movehdup_ps(x));
  return _mm_cvtss_f32(x);
}

inline int hsum_i32_8(__m256i a) {
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(a), _mm256_extracti128_si256(a, 1));
  s = _mm_add_epi32(s, _mm_srli_si128(s, 8));
  s = _mm_add_epi32(s, _mm_srli_si128(s, 4));
  return _mm_cvtsi128_si32(s);
}

// The lane-wise sum of four int32 chains.
inline __m256i add4(const __m256i c[4]) {
  return _mm256_add_epi32(_mm256_add_epi32(c[0], c[1]), _mm256_add_epi32(c[2], c[3]));
}

[[gnu::noinline]] inline void dot_q4_1_q8_1(int64_t n, float* s, const BlockQ4_1* x, const BlockQ8_1* y) {
  __m256 acc = _mm256_setzero_ps();
  float summs = 0;
  for (int64_t ib = 0; ib < n / kQK8_1; ++ib) {
    summs += f16_to_f32(x[ib].m) * f16_to_f32(y[ib].s);
    const __m256 d = _mm256_set1_ps(f16_to_f32(x[ib].d) * f16_to_f32(y[ib].d));
    const __m256 q = _mm256_cvtepi32_ps(dot_u8_i8(bytes_from_nibbles_32(x[ib].qs), load256(y[ib].qs)));
    acc = _mm256_fmadd_ps(d, q, acc);
  }
  *s = hsum_float_8(acc) + summs;
}

[[gnu::noinline]] inline void dot_q5_0_q8_0(int64_t n, float* s, const BlockQ5_0* x, const BlockQ8_0* y) {
  __m256 acc = _mm256_setzero_ps();
  for (int64_t ib = 0; ib < n / kQK8_0; ++ib) {
    const __m256 d = _mm256_set1_ps(f16_to_f32(x[ib].d) * f16_to_f32(y[ib].d));
    const __m256i qx = q5_0_levels(x[ib]);
    const __m256 q = _mm256_cvtepi32_ps(dot_i8_i8(qx, load256(y[ib].qs)));
    acc = _mm256_fmadd_ps(d, q, acc);
  }
  *s = hsum_float_8(acc);
}

[[gnu::noinline]] inline void dot_q5_1_q8_1(int64_t n, float* s, const BlockQ5_1* x, const BlockQ8_1* y) {
  __m256 acc = _mm256_setzero_ps();
  float summs = 0;
  for (int64_t ib = 0; ib < n / kQK8_1; ++ib) {
    summs += f16_to_f32(x[ib].m) * f16_to_f32(y[ib].s);
    const __m256 d = _mm256_set1_ps(f16_to_f32(x[ib].d) * f16_to_f32(y[ib].d));
    const __m256i qx = q5_1_levels(x[ib]);
    const __m256 q = _mm256_cvtepi32_ps(dot_u8_i8(qx, load256(y[ib].qs)));
    acc = _mm256_fmadd_ps(d, q, acc);
  }
  *s = hsum_float_8(acc) + summs;
}

[[gnu::noinline]] inline void dot_iq4_nl_q8_0(int64_t n, float* s, const BlockIQ4NL* x, const BlockQ8_0* y) {
  const __m128i values = _mm_loadu_si128(reinterpret_cast<const __m128i*>(kValuesIQ4NL));
  const __m128i m4 = _mm_set1_epi8(0x0f);
  __m256 acc = _mm256_setzero_ps();
  for (int64_t ib = 0; ib < n / kQK4_NL; ++ib) {
    const __m128i q4bits = _mm_loadu_si128(reinterpret_cast<const __m128i*>(x[ib].qs));
    const __m128i lo = _mm_shuffle_epi8(values, _mm_and_si128(q4bits, m4));
    const __m128i hi = _mm_shuffle_epi8(values, _mm_and_si128(_mm_srli_epi16(q4bits, 4), m4));
    const __m256i qx = _mm256_insertf128_si256(_mm256_castsi128_si256(lo), hi, 1);
    const __m256 d = _mm256_set1_ps(f16_to_f32(y[ib].d) * f16_to_f32(x[ib].d));
    const __m256 q = _mm256_cvtepi32_ps(dot_i8_i8(qx, load256(y[ib].qs)));
    acc = _mm256_fmadd_ps(d, q, acc);
  }
  *s = hsum_float_8(acc);
}

// The *_rows8 order (kernels.h; vec_dot_rows8.cpp): exact integer block sums, one scalar FMA per block.
[[gnu::noinline]] inline void dot_iq4_nl_q8_0_rows8(int64_t n, float* s, const BlockIQ4NL* x,
                                                     const BlockQ8_0* y) {
  const __m128i values = _mm_loadu_si128(reinterpret_cast<const __m128i*>(kValuesIQ4NL));
  const __m128i m4 = _mm_set1_epi8(0x0f);
  float acc = 0.0f;
  for (int64_t ib = 0; ib < n / kQK4_NL; ++ib) {
    const __m128i q4bits = _mm_loadu_si128(reinterpret_cast<const __m128i*>(x[ib].qs));
    const __m128i lo = _mm_shuffle_epi8(values, _mm_and_si128(q4bits, m4));
    const __m128i hi = _mm_shuffle_epi8(values, _mm_and_si128(_mm_srli_epi16(q4bits, 4), m4));
    const __m256i qx = _mm256_insertf128_si256(_mm256_castsi128_si256(lo), hi, 1);
    const int isum = hsum_i32_8(dot_i8_i8(qx, load256(y[ib].qs)));
    acc = std::fma(static_cast<float>(isum), f16_to_f32(x[ib].d) * f16_to_f32(y[ib].d), acc);
  }
  *s = acc;
}

inline void dot_iq4_nl_q8_0_rows8_8x4(int64_t n, float* s, size_t s_stride, const BlockIQ4NL* x,
                                      size_t x_stride, const BlockQ8_0* y, size_t y_stride) {
  // The levels (-127..113) by a byte lookup, kept with their magnitudes; sum(level * y) from
  // maddubs of |level| with y carrying the level's sign (|pair sum| <= 2 * 127 * 127, no
  // saturation for Q8_0's -127..127), each summed into 32 bits at once (int_steps_simd.h).
  const __m256i table =
      _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(kValuesIQ4NL)));
  struct Levels {
    __m256i level[8], mag[8];
  };
  rows8_q8_0_8x4(
      n, s, s_stride, x, x_stride, y, y_stride,
      [&](const __m256i w[8]) {
        Levels l;
        for (int k = 0; k < 8; ++k) {
          l.level[k] = _mm256_shuffle_epi8(table, w[k]);
          l.mag[k] = _mm256_abs_epi8(l.level[k]);
        }
        return l;
      },
      [&](const Levels& l, const int8_t* qy) {
        // Two chains (even and odd j) of exact sums.
        __m256i sum[2] = {_mm256_setzero_si256(), _mm256_setzero_si256()};
        for (int j = 0; j < 8; ++j)
          sum[j % 2] = dot_u8_i8_add(sum[j % 2], l.mag[j], _mm256_sign_epi8(broadcast_y4(qy, j), l.level[j]));
        return _mm256_add_epi32(sum[0], sum[1]);
      });
}

// Lane k of the integer sum: over the 8 sub-blocks, scale times the products of bytes 4k..4k+3
// (exact); then one FMA per super-block and ggml's final hsum. ref: ggml_vec_dot_iq4_xs_q8_K (AVX2)
[[gnu::noinline]] inline void dot_iq4_xs_q8_K(int64_t n, float* s, const BlockIQ4XS* x, const BlockQ8_K* y) {
  const __m128i values = _mm_loadu_si128(reinterpret_cast<const __m128i*>(kValuesIQ4NL));
  const __m128i m4 = _mm_set1_epi8(0x0f);
  __m256 acc = _mm256_setzero_ps();
  for (int64_t ibl = 0; ibl < n / kQK_K; ++ibl) {
    const uint8_t* qs = x[ibl].qs;
    const int8_t* q8 = y[ibl].qs;
    uint32_t sh = x[ibl].scales_h;
    __m256i sumi[2] = {_mm256_setzero_si256(), _mm256_setzero_si256()};
    for (int ib = 0; ib < kQK_K / 32; ++ib) {
      const __m128i q4bits = _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs + 16 * ib));
      const __m128i lo = _mm_shuffle_epi8(values, _mm_and_si128(q4bits, m4));
      const __m128i hi = _mm_shuffle_epi8(values, _mm_and_si128(_mm_srli_epi16(q4bits, 4), m4));
      const __m256i qx = _mm256_insertf128_si256(_mm256_castsi128_si256(lo), hi, 1);
      const __m256i qy = load256(q8 + 32 * ib);
      // pairs of products as int16 (|level| <= 127, q8 >= -128: no saturation), then scaled
      const __m256i p16 = _mm256_maddubs_epi16(_mm256_sign_epi8(qx, qx), _mm256_sign_epi8(qy, qx));
      const int ls =
          static_cast<int>(((x[ibl].scales_l[ib / 2] >> (4 * (ib % 2))) & 0xf) | ((sh & 3) << 4)) - 32;
      sh >>= 2;
      sumi[ib % 2] = madd_add(sumi[ib % 2], p16, _mm256_set1_epi16(static_cast<int16_t>(ls)));
    }
    const __m256 d = _mm256_set1_ps(f16_to_f32(x[ibl].d) * y[ibl].d);
    acc = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(_mm256_add_epi32(sumi[0], sumi[1])), acc);
  }
  *s = hsum_float_8(acc);
}

[[gnu::noinline]] inline void dot_q2_K_q8_K(int64_t n, float* s, const BlockQ2_K* x, const BlockQ8_K* y) {
  const __m256i m3 = _mm256_set1_epi8(3);
  __m256 acc = _mm256_setzero_ps();
  float summs_f = 0;
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    prefetch_weight_block<sizeof(BlockQ2_K)>(&x[i]);
    const float dall = y[i].d * f16_to_f32(x[i].d);
    const float dmin = y[i].d * f16_to_f32(x[i].dmin);
    // Mins (high nibbles) against the 16 bsums.
    const __m128i sc8 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(x[i].scales));
    const __m256i mins = _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(sc8, 4), _mm_set1_epi8(0xF)));
    const __m256i prod = _mm256_madd_epi16(mins, load256(y[i].bsums));
    const __m128i p4 = _mm_add_epi32(_mm256_castsi256_si128(prod), _mm256_extracti128_si256(prod, 1));
    const __m128i p2 = _mm_add_epi32(p4, _mm_srli_si128(p4, 8));
    const int summs = _mm_cvtsi128_si32(_mm_add_epi32(p2, _mm_srli_si128(p2, 4)));
    summs_f -= dmin * summs;
    const uint8_t* q2 = x[i].qs;
    const int8_t* q8 = y[i].qs;
    const __m128i scales =
        _mm_and_si128(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x[i].scales)), _mm_set1_epi8(0xF));
    __m256i sumi[4];
    for (__m256i& c : sumi) c = _mm256_setzero_si256();
    for (int j = 0; j < kQK_K / 128; ++j) {
      const __m256i q2bits = load256(q2);
      q2 += 32;
      for (int k = 0; k < 4; ++k) {
        const __m256i q2k = _mm256_and_si256(_mm256_srli_epi16(q2bits, 2 * k), m3);
        const __m256i p16 = _mm256_maddubs_epi16(q2k, load256(q8));
        q8 += 32;
        sumi[k] = madd_add(sumi[k], scales_pair_of(scales, 4 * j + k), p16);
      }
    }
    acc = _mm256_fmadd_ps(_mm256_set1_ps(dall), _mm256_cvtepi32_ps(add4(sumi)), acc);
  }
  *s = hsum_float_8(acc) + summs_f;
}

[[gnu::noinline]] inline void dot_q3_K_q8_K(int64_t n, float* s, const BlockQ3_K* x, const BlockQ8_K* y) {
  const __m256i m3 = _mm256_set1_epi8(3);
  const __m256i m1 = _mm256_set1_epi8(1);
  __m256 acc = _mm256_setzero_ps();
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    prefetch_weight_block<sizeof(BlockQ3_K)>(&x[i]);
    const float d = y[i].d * f16_to_f32(x[i].d);
    const __m128i scales = q3_K_scales(x[i].scales);
    const __m256i hbits = load256(x[i].hmask);
    const uint8_t* q3 = x[i].qs;
    const int8_t* q8 = y[i].qs;
    __m256i sumi[4];
    for (__m256i& c : sumi) c = _mm256_setzero_si256();
    for (int j = 0; j < kQK_K / 128; ++j) {
      const __m256i q3bits = load256(q3);
      q3 += 32;
      for (int k = 0; k < 4; ++k) {
        const int bit = 4 * j + k;  // the chunk: its hmask bit and its pair of scales
        const __m256i q3l = _mm256_and_si256(_mm256_srli_epi16(q3bits, 2 * k), m3);
        // 4 where the high bit is clear: level = q3l - 4 * (1 - h).
        const __m256i q3h = _mm256_slli_epi16(
            _mm256_andnot_si256(_mm256_and_si256(_mm256_srli_epi16(hbits, bit), m1), m1), 2);
        const __m256i q8k = load256(q8);
        q8 += 32;
        const __m256i p16 = _mm256_sub_epi16(_mm256_maddubs_epi16(q3l, q8k), _mm256_maddubs_epi16(q3h, q8k));
        sumi[k] = madd_add(sumi[k], scales_pair_of(scales, bit), p16);
      }
    }
    acc = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(add4(sumi)), acc);
  }
  *s = hsum_float_8(acc);
}

[[gnu::noinline]] inline void dot_q4_K_q8_K(int64_t n, float* s, const BlockQ4_K* x, const BlockQ8_K* y) {
  const __m256i m4 = _mm256_set1_epi8(0xF);
  __m256 acc = _mm256_setzero_ps();
  __m128 acc_m = _mm_setzero_ps();
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    prefetch_weight_block<sizeof(BlockQ4_K)>(&x[i]);
    const float d = y[i].d * f16_to_f32(x[i].d);
    const float dmin = -y[i].d * f16_to_f32(x[i].dmin);
    // Unpack the 6-bit scales (bytes 0..7) and mins (bytes 8..15).
    uint8_t sm[16];
    k4_scales_mins(x[i].scales, sm);

    // Mins times the sums of q8 per 32 (pairs of bsums).
    const __m128i mins = _mm_cvtepu8_epi16(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(sm + 8)));
    const __m256i q8sums = load256(y[i].bsums);
    const __m128i q8s =
        _mm_hadd_epi16(_mm256_extracti128_si256(q8sums, 0), _mm256_extracti128_si256(q8sums, 1));
    const __m128i prod = _mm_madd_epi16(mins, q8s);
    acc_m = _mm_fmadd_ps(_mm_set1_ps(dmin), _mm_cvtepi32_ps(prod), acc_m);

    const uint8_t* q4 = x[i].qs;
    const int8_t* q8 = y[i].qs;
    __m256i sum_l = _mm256_setzero_si256(), sum_h = _mm256_setzero_si256();
    for (int j = 0; j < kQK_K / 64; ++j) {
      const __m256i scale_l = _mm256_set1_epi16(sm[2 * j + 0]);
      const __m256i scale_h = _mm256_set1_epi16(sm[2 * j + 1]);
      const __m256i q4bits = load256(q4);
      q4 += 32;
      const __m256i q4l = _mm256_and_si256(q4bits, m4);
      const __m256i q4h = _mm256_and_si256(_mm256_srli_epi16(q4bits, 4), m4);
      sum_l = madd_add(sum_l, scale_l, _mm256_maddubs_epi16(q4l, load256(q8)));
      q8 += 32;
      sum_h = madd_add(sum_h, scale_h, _mm256_maddubs_epi16(q4h, load256(q8)));
      q8 += 32;
    }
    acc = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(_mm256_add_epi32(sum_l, sum_h)), acc);
  }
  *s = hsum_float_8(acc) + hsum_float_4(acc_m);
}

[[gnu::noinline]] inline void dot_q5_K_q8_K(int64_t n, float* s, const BlockQ5_K* x, const BlockQ8_K* y) {
  const __m256i m4 = _mm256_set1_epi8(0xF);
  const __m256i m1 = _mm256_set1_epi8(1);
  __m256 acc = _mm256_setzero_ps();
  __m128 acc_m = _mm_setzero_ps();
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    prefetch_weight_block<sizeof(BlockQ5_K)>(&x[i]);
    const float d = y[i].d * f16_to_f32(x[i].d);
    const float dmin = -y[i].d * f16_to_f32(x[i].dmin);
    uint8_t sm[16];
    k4_scales_mins(x[i].scales, sm);
    const __m128i mins = _mm_cvtepu8_epi16(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(sm + 8)));
    const __m256i q8sums = load256(y[i].bsums);
    const __m128i q8s =
        _mm_hadd_epi16(_mm256_extracti128_si256(q8sums, 0), _mm256_extracti128_si256(q8sums, 1));
    acc_m = _mm_fmadd_ps(_mm_set1_ps(dmin), _mm_cvtepi32_ps(_mm_madd_epi16(mins, q8s)), acc_m);

    const uint8_t* q5 = x[i].qs;
    const int8_t* q8 = y[i].qs;
    const __m256i hbits = load256(x[i].qh);
    __m256i sum_l = _mm256_setzero_si256(), sum_h = _mm256_setzero_si256();
    for (int j = 0; j < kQK_K / 64; ++j) {
      const __m256i q5bits = load256(q5);
      q5 += 32;
      const __m256i hl = _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hbits, 2 * j + 0), m1), 4);
      const __m256i hh = _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hbits, 2 * j + 1), m1), 4);
      const __m256i q5l = _mm256_or_si256(_mm256_and_si256(q5bits, m4), hl);
      const __m256i q5h = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(q5bits, 4), m4), hh);
      sum_l = madd_add(sum_l, _mm256_set1_epi16(sm[2 * j + 0]), _mm256_maddubs_epi16(q5l, load256(q8)));
      q8 += 32;
      sum_h = madd_add(sum_h, _mm256_set1_epi16(sm[2 * j + 1]), _mm256_maddubs_epi16(q5h, load256(q8)));
      q8 += 32;
    }
    acc = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(_mm256_add_epi32(sum_l, sum_h)), acc);
  }
  *s = hsum_float_8(acc) + hsum_float_4(acc_m);
}

[[gnu::noinline]] inline void dot_q6_K_q8_K(int64_t n, float* s, const BlockQ6_K* x, const BlockQ8_K* y) {
  __m256 acc = _mm256_setzero_ps();
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    prefetch_weight_block<sizeof(BlockQ6_K)>(&x[i]);
    const float d = y[i].d * f16_to_f32(x[i].d);
    const uint8_t* q4 = x[i].ql;
    const uint8_t* qh = x[i].qh;
    const int8_t* q8 = y[i].qs;
    const __m128i scales = _mm_loadu_si128(reinterpret_cast<const __m128i*>(x[i].scales));
    __m256i chunk_sums[4];
    for (__m256i& c : chunk_sums) c = _mm256_setzero_si256();
    for (int j = 0; j < kQK_K / 128; ++j) {
      __m256i lv[4];
      q6_K_levels(q4, qh, lv);
      q4 += 64;
      qh += 32;
      for (int k = 0; k < 4; ++k) {
        const __m256i p16 = _mm256_maddubs_epi16(lv[k], load256(q8 + 32 * k));
        chunk_sums[k] = madd_add(chunk_sums[k], scales_pair_of(scales, 4 * j + k), p16);
      }
      q8 += 128;
    }
    __m256i sumi = add4(chunk_sums);
    // The lanes' integer split of the bias matters: each lane is rounded to F32 and scaled
    // separately below.
    sumi = _mm256_sub_epi32(sumi, q6_K_bias(y[i].bsums, _mm256_cvtepi8_epi16(scales)));
    acc = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(sumi), acc);
  }
  *s = hsum_float_8(acc);
}

}  // namespace
}  // namespace kiln::quant

// Defines kernels.h's vec_dot_<type>_<LEVEL> for every dot product above, compiled for the
// including file's level (inside namespace kiln::quant): one list for both levels.
#define KILN_DEFINE_INT_VEC_DOTS(LEVEL)                                                            \
  void vec_dot_q4_1_q8_1_##LEVEL(int64_t n, float* s, const BlockQ4_1* x, const BlockQ8_1* y) {    \
    dot_q4_1_q8_1(n, s, x, y);                                                                     \
  }                                                                                                \
  void vec_dot_q5_0_q8_0_##LEVEL(int64_t n, float* s, const BlockQ5_0* x, const BlockQ8_0* y) {    \
    dot_q5_0_q8_0(n, s, x, y);                                                                     \
  }                                                                                                \
  void vec_dot_q5_1_q8_1_##LEVEL(int64_t n, float* s, const BlockQ5_1* x, const BlockQ8_1* y) {    \
    dot_q5_1_q8_1(n, s, x, y);                                                                     \
  }                                                                                                \
  void vec_dot_iq4_nl_q8_0_##LEVEL(int64_t n, float* s, const BlockIQ4NL* x, const BlockQ8_0* y) { \
    dot_iq4_nl_q8_0(n, s, x, y);                                                                   \
  }                                                                                                \
  void vec_dot_iq4_nl_q8_0_rows8_##LEVEL(int64_t n, float* s, const BlockIQ4NL* x, const BlockQ8_0* y) {  \
    dot_iq4_nl_q8_0_rows8(n, s, x, y);                                                                  \
  }                                                                                                     \
  void vec_dot_iq4_nl_q8_0_rows8_8x4_##LEVEL(int64_t n, float* s, size_t s_stride, const BlockIQ4NL* x, \
                                             size_t x_stride, const BlockQ8_0* y, size_t y_stride) {    \
    dot_iq4_nl_q8_0_rows8_8x4(n, s, s_stride, x, x_stride, y, y_stride);                                \
  }                                                                                                     \
  void vec_dot_iq4_xs_q8_K_##LEVEL(int64_t n, float* s, const BlockIQ4XS* x, const BlockQ8_K* y) { \
    dot_iq4_xs_q8_K(n, s, x, y);                                                                   \
  }                                                                                                \
  void vec_dot_q2_K_q8_K_##LEVEL(int64_t n, float* s, const BlockQ2_K* x, const BlockQ8_K* y) {    \
    dot_q2_K_q8_K(n, s, x, y);                                                                     \
  }                                                                                                \
  void vec_dot_q3_K_q8_K_##LEVEL(int64_t n, float* s, const BlockQ3_K* x, const BlockQ8_K* y) {    \
    dot_q3_K_q8_K(n, s, x, y);                                                                     \
  }                                                                                                \
  void vec_dot_q4_K_q8_K_##LEVEL(int64_t n, float* s, const BlockQ4_K* x, const BlockQ8_K* y) {    \
    dot_q4_K_q8_K(n, s, x, y);                                                                     \
  }                                                                                                \
  void vec_dot_q5_K_q8_K_##LEVEL(int64_t n, float* s, const BlockQ5_K* x, const BlockQ8_K* y) {    \
    dot_q5_K_q8_K(n, s, x, y);                                                                     \
  }                                                                                                \
  void vec_dot_q6_K_q8_K_##LEVEL(int64_t n, float* s, const BlockQ6_K* x, const BlockQ8_K* y) {    \
    dot_q6_K_q8_K(n, s, x, y);                                                                     \
  }
