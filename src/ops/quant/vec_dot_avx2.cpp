// AVX2 + FMA + F16C dot products (compiled with -mavx2 -mfma -mf16c; call only when
// cpu_has_avx2()). Integer parts are exact; float accumulation follows ggml's x86 kernels as the
// AVX-512 reference build of llama.cpp runs them (ref: ggml-cpu/arch/x86/quants.c, vec.cpp,
// arch/x86/repack.cpp), bit for bit where tests/quant/ggml_golden_test.cpp checks it (F32, F16,
// Q6_K and the *_rows8 kernels), so results agree with the scalar references to float rounding.
//
// The pragma enables the ISA here even when the build does not pass the *_avx2.cpp flags (the
// CMake helper kiln_simd_flags currently applies none: its parameter shadows the list it reads).
#pragma GCC target("avx2,fma,f16c")
#include <immintrin.h>

#include <bit>
#include <cmath>
#include <cstring>

#include "ops/quant/k_quants_avx2.h"
#include "ops/quant/kernels.h"
#include "ops/quant/legacy_avx2.h"
#include "ops/quant/q4_0_lanes_avx2.h"
#include "ops/quant/vec_dots_simd.h"

namespace kiln::quant {
namespace {

inline __m256 load_f16x8(const uint16_t* p) {
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}

// Lane k of the result: the sum of the 8 lanes of v[k] (exact integer sums).
inline __m256i hsum_i32_8x8(const __m256i v[8]) {
  const __m256i h01 = _mm256_hadd_epi32(v[0], v[1]);
  const __m256i h23 = _mm256_hadd_epi32(v[2], v[3]);
  const __m256i h45 = _mm256_hadd_epi32(v[4], v[5]);
  const __m256i h67 = _mm256_hadd_epi32(v[6], v[7]);
  const __m256i h0123 = _mm256_hadd_epi32(h01, h23);  // per 128-bit half: v0..v3 partial sums
  const __m256i h4567 = _mm256_hadd_epi32(h45, h67);
  return _mm256_add_epi32(_mm256_permute2x128_si256(h0123, h4567, 0x20),
                          _mm256_permute2x128_si256(h0123, h4567, 0x31));
}

// 8 BF16 values widened to F32 (exact).
inline __m256 load_bf16x8(const uint16_t* p) {
  const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}

// Reduces four 8-lane accumulators as ggml's GGML_F32x8_REDUCE does: pairwise, then lanes.
inline float reduce_4x8(__m256 sum[4]) {
  sum[0] = _mm256_add_ps(sum[0], sum[2]);
  sum[1] = _mm256_add_ps(sum[1], sum[3]);
  sum[0] = _mm256_add_ps(sum[0], sum[1]);
  return hsum_float_8(sum[0]);
}

}  // namespace

void vec_dot_q8_0_q8_0_avx2(int64_t n, float* s, const BlockQ8_0* x, const BlockQ8_0* y) {
  __m256 acc = _mm256_setzero_ps();
  for (int64_t ib = 0; ib < n / kQK8_0; ++ib) {
    const __m256 d = _mm256_set1_ps(f16_to_f32(x[ib].d) * f16_to_f32(y[ib].d));
    const __m256 q = _mm256_cvtepi32_ps(dot_i8_i8(load256(x[ib].qs), load256(y[ib].qs)));
    acc = _mm256_fmadd_ps(d, q, acc);
  }
  *s = hsum_float_8(acc);
}

void vec_dot_q4_0_q8_0_avx2(int64_t n, float* s, const BlockQ4_0* x, const BlockQ8_0* y) {
  __m256 acc = _mm256_setzero_ps();
  const __m256i off = _mm256_set1_epi8(8);
  for (int64_t ib = 0; ib < n / kQK8_0; ++ib) {
    const __m256 d = _mm256_set1_ps(f16_to_f32(x[ib].d) * f16_to_f32(y[ib].d));
    const __m256i qx = _mm256_sub_epi8(bytes_from_nibbles_32(x[ib].qs), off);
    const __m256 q = _mm256_cvtepi32_ps(dot_i8_i8(qx, load256(y[ib].qs)));
    acc = _mm256_fmadd_ps(d, q, acc);
  }
  *s = hsum_float_8(acc);
}

// Q4_1, Q5_0, Q5_1, IQ4_NL, IQ4_XS, Q2_K .. Q6_K (vec_dots_simd.h, shared with vec_dot_avx512.cpp).
KILN_DEFINE_INT_VEC_DOTS(avx2)

namespace {

// The F16, F32 and BF16 dot products over rows whose value e sits at at(e) (kernels.h PlainPos or
// Split16Pos): they load eight values from e = 8j, which are contiguous in both.

// The main loop of the three: K accumulators of eight lanes over the steps of 8K values i < np,
// acc[k] taking fma(the eight values at at(i + 8k)) in step order. In a 16-value step, values 0..7
// go to an even accumulator and 8..15 to an odd one; split rows keep the first in the row's first
// half and the second in its second half. There the even accumulators run over the first half and
// then the odd ones over the second, so each operand is read front to back as one stream: taken
// interleaved, the halves are two streams half a row apart (2 KB on the 1.1B shape), which the
// hardware prefetcher follows poorly (F16 rows: 23 against 36 GB/s on two Zen 3 cores). Each
// accumulator sees the same FMAs in the same order either way.
template <int K, class Pos, class Fma8>
void accumulate_steps(int64_t np, Pos at, __m256 (&acc)[K], Fma8 fma8) {
  static_assert(K % 2 == 0);
  constexpr int64_t kStep = 8 * K;
  for (__m256& a : acc) a = _mm256_setzero_ps();
  if constexpr (Pos::kHalvesApart) {
    for (int64_t i = 0; i < np; i += kStep)
      for (int k = 0; k < K; k += 2) acc[k] = fma8(at(i + 8 * k), acc[k]);
    for (int64_t i = 0; i < np; i += kStep)
      for (int k = 1; k < K; k += 2) acc[k] = fma8(at(i + 8 * k), acc[k]);
  } else {
    for (int64_t i = 0; i < np; i += kStep)
      for (int k = 0; k < K; ++k) acc[k] = fma8(at(i + 8 * k), acc[k]);
  }
}

// GGML_F16_STEP / GGML_F32_STEP 64 as the AVX-512 build runs them: four accumulators of 16 lanes,
// each held here as two 8-lane halves (acc[2j] = lanes 0..7 of accumulator j, acc[2j + 1] = lanes
// 8..15; lane-wise FMAs are the same), reduced as GGML_F32Cx16_REDUCE then _mm512_reduce_add_ps
// (GCC's equals hsum_float_8(hi + lo)).
constexpr int64_t kStep16 = 64;
inline float reduce_16_lanes(__m256 (&acc)[8]) {
  for (int h = 0; h < 2; ++h) {
    acc[h] = _mm256_add_ps(acc[h], acc[h + 4]);
    acc[h + 2] = _mm256_add_ps(acc[h + 2], acc[h + 6]);
    acc[h] = _mm256_add_ps(acc[h], acc[h + 2]);
  }
  return hsum_float_8(_mm256_add_ps(acc[1], acc[0]));
}

// ref: ggml_vec_dot_f16 (ggml-cpu/vec.cpp) as the AVX-512 build runs it (leftovers in double).
// finish_*: the reduction of the accumulators accumulate_steps left and the values past np.
template <class Pos>
float finish_f16(int64_t n, __m256 (&acc)[8], const uint16_t* x, const uint16_t* y, Pos at) {
  const int64_t np = n & ~(kStep16 - 1);
  double sumf = np > 0 ? static_cast<double>(reduce_16_lanes(acc)) : 0.0;
  for (int64_t i = np; i < n; ++i) sumf += static_cast<double>(f16_to_f32(x[at(i)]) * f16_to_f32(y[at(i)]));
  return static_cast<float>(sumf);
}
template <class Pos>
float dot_f16(int64_t n, const uint16_t* x, const uint16_t* y, Pos at) {
  __m256 acc[8];
  accumulate_steps(n & ~(kStep16 - 1), at, acc, [&](int64_t o, __m256 a) {
    return _mm256_fmadd_ps(load_f16x8(x + o), load_f16x8(y + o), a);
  });
  return finish_f16(n, acc, x, y, at);
}

// ref: ggml_vec_dot_f32 (ggml-cpu/vec.cpp) as the AVX-512 build runs it, into a float sum; GCC
// compiles the leftover loop `sumf += x[i]*y[i]` into rounded products added in index order for
// chunks of 16, then one chunk of 8, and fused multiply-adds for the last < 8 (read from the
// disassembly of the reference build, libggml-cpu-zen4.so).
template <class Pos>
float finish_f32(int64_t n, __m256 (&acc)[8], const float* x, const float* y, Pos at) {
  const int64_t np = n & ~(kStep16 - 1);
  float sumf = reduce_16_lanes(acc);
  int64_t i = np;
  const int64_t rest = n - np;
  const int64_t unfused = (rest & ~int64_t{15}) + ((rest & 15) >= 8 ? 8 : 0);
  for (; i < np + unfused; ++i) {
    const float p = x[at(i)] * y[at(i)];
    sumf += p;
  }
  for (; i < n; ++i) sumf = std::fma(x[at(i)], y[at(i)], sumf);
  return sumf;
}
template <class Pos>
float dot_f32(int64_t n, const float* x, const float* y, Pos at) {
  __m256 acc[8];
  accumulate_steps(n & ~(kStep16 - 1), at, acc, [&](int64_t o, __m256 a) {
    return _mm256_fmadd_ps(_mm256_loadu_ps(x + o), _mm256_loadu_ps(y + o), a);
  });
  return finish_f32(n, acc, x, y, at);
}

// Four accumulators of eight lanes over steps of 32 values, leftovers in double.
constexpr int64_t kStepBF16 = 32;
template <class Pos>
float finish_bf16(int64_t n, __m256 (&sum)[4], const uint16_t* x, const uint16_t* y, Pos at) {
  double sumf = reduce_4x8(sum);
  for (int64_t i = n & ~(kStepBF16 - 1); i < n; ++i) {
    const float xi = std::bit_cast<float>(static_cast<uint32_t>(x[at(i)]) << 16);
    const float yi = std::bit_cast<float>(static_cast<uint32_t>(y[at(i)]) << 16);
    sumf += static_cast<double>(xi * yi);
  }
  return static_cast<float>(sumf);
}
template <class Pos>
float dot_bf16(int64_t n, const uint16_t* x, const uint16_t* y, Pos at) {
  __m256 sum[4];
  accumulate_steps(n & ~(kStepBF16 - 1), at, sum, [&](int64_t o, __m256 a) {
    return _mm256_fmadd_ps(load_bf16x8(x + o), load_bf16x8(y + o), a);
  });
  return finish_bf16(n, sum, x, y, at);
}

// The accumulators of kernels.h's finish functions, K of them from lanes (K x 8 floats), in the
// half-major order: the even ones (acc[2c] at lanes + 8c), then the odd ones (acc[2c + 1] at
// lanes + 8 (K / 2 + c)).
template <int K>
void load_accumulators(const float* lanes, __m256 (&acc)[K]) {
  for (int c = 0; c < K / 2; ++c) {
    acc[2 * c] = _mm256_loadu_ps(lanes + 8 * c);
    acc[2 * c + 1] = _mm256_loadu_ps(lanes + 8 * (K / 2 + c));
  }
}

}  // namespace

void vec_dot_f16_avx2(int64_t n, float* s, const uint16_t* x, const uint16_t* y) {
  *s = dot_f16(n, x, y, PlainPos{});
}
void vec_dot_f32_avx2(int64_t n, float* s, const float* x, const float* y) {
  *s = dot_f32(n, x, y, PlainPos{});
}
void vec_dot_bf16_avx2(int64_t n, float* s, const uint16_t* x, const uint16_t* y) {
  *s = dot_bf16(n, x, y, PlainPos{});
}
void vec_dot_f16_split16_avx2(int64_t n, float* s, const uint16_t* x, const uint16_t* y) {
  *s = dot_f16(n, x, y, Split16Pos{n});
}
void vec_dot_f32_split16_avx2(int64_t n, float* s, const float* x, const float* y) {
  *s = dot_f32(n, x, y, Split16Pos{n});
}
void vec_dot_bf16_split16_avx2(int64_t n, float* s, const uint16_t* x, const uint16_t* y) {
  *s = dot_bf16(n, x, y, Split16Pos{n});
}
float vec_dot_f16_split16_finish_avx2(int64_t n, const float* lanes, const uint16_t* x, const uint16_t* y) {
  __m256 acc[8];
  load_accumulators(lanes, acc);
  return finish_f16(n, acc, x, y, Split16Pos{n});
}
float vec_dot_f32_split16_finish_avx2(int64_t n, const float* lanes, const float* x, const float* y) {
  __m256 acc[8];
  load_accumulators(lanes, acc);
  return finish_f32(n, acc, x, y, Split16Pos{n});
}
float vec_dot_bf16_split16_finish_avx2(int64_t n, const float* lanes, const uint16_t* x, const uint16_t* y) {
  __m256 acc[4];
  load_accumulators(lanes, acc);
  return finish_bf16(n, acc, x, y, Split16Pos{n});
}

// The *_rows8 order (vec_dot_rows8.cpp): exact integer block sums, one scalar FMA per block.
void vec_dot_q4_0_q8_0_rows8_avx2(int64_t n, float* s, const BlockQ4_0* x, const BlockQ8_0* y) {
  const __m256i off = _mm256_set1_epi8(8);
  const int64_t nb = n / kQK8_0;
  float acc = 0.0f;
  int64_t ib = 0;
  // Eight blocks at a time: their integer sums side by side in one vector, then the scalar FMAs in
  // block order.
  for (; ib + 8 <= nb; ib += 8) {
    __m256i p[8];
    alignas(32) float scale[8];
    for (int k = 0; k < 8; ++k) {
      const __m256i qx = _mm256_sub_epi8(bytes_from_nibbles_32(x[ib + k].qs), off);
      p[k] = dot_i8_i8(qx, load256(y[ib + k].qs));
      scale[k] = f16_to_f32(x[ib + k].d) * f16_to_f32(y[ib + k].d);
    }
    alignas(32) float fsum[8];
    _mm256_store_ps(fsum, _mm256_cvtepi32_ps(hsum_i32_8x8(p)));
    for (int k = 0; k < 8; ++k) acc = std::fma(fsum[k], scale[k], acc);
  }
  for (; ib < nb; ++ib) {
    const __m256i qx = _mm256_sub_epi8(bytes_from_nibbles_32(x[ib].qs), off);
    const int isum = hsum_i32_8(dot_i8_i8(qx, load256(y[ib].qs)));
    acc = std::fma(static_cast<float>(isum), f16_to_f32(x[ib].d) * f16_to_f32(y[ib].d), acc);
  }
  *s = acc;
}

void vec_dot_q4_0_q8_0_rows8_8x4_avx2(int64_t n, float* s, size_t s_stride, const BlockQ4_0* x,
                                      size_t x_stride, const BlockQ8_0* y, size_t y_stride) {
  // sum(q * y) from maddubs pair sums: four of them added in 16 bits (|sum| <= 4 * 2 * 15 * 128
  // = 15360, no overflow) before widening; minus 8 * sum(y).
  const __m256i ones8 = _mm256_set1_epi8(1), ones16 = _mm256_set1_epi16(1);
  q4_0_q8_0_rows8_8x4(n, s, s_stride, x, x_stride, y, y_stride, [&](const __m256i w[8], const int8_t* qy) {
    __m256i half[2];
    for (int h = 0; h < 2; ++h) {
      const int k = 4 * h;
      half[h] = _mm256_add_epi16(_mm256_add_epi16(_mm256_maddubs_epi16(w[k], broadcast_y4(qy, k)),
                                                  _mm256_maddubs_epi16(w[k + 1], broadcast_y4(qy, k + 1))),
                                 _mm256_add_epi16(_mm256_maddubs_epi16(w[k + 2], broadcast_y4(qy, k + 2)),
                                                  _mm256_maddubs_epi16(w[k + 3], broadcast_y4(qy, k + 3))));
    }
    const __m256i dot =
        _mm256_add_epi32(_mm256_madd_epi16(half[0], ones16), _mm256_madd_epi16(half[1], ones16));
    const __m256i ysum =
        broadcast_sum_i32x8(_mm256_madd_epi16(_mm256_maddubs_epi16(ones8, load256(qy)), ones16));
    return _mm256_sub_epi32(dot, _mm256_slli_epi32(ysum, 3));
  });
}

void vec_dot_q4_K_q8_K_rows8_avx2(int64_t n, float* s, const BlockQ4_K* x, const BlockQ8_K* y) {
  const __m256i m4 = _mm256_set1_epi8(0xF);
  float acc = 0.0f, acc_min = 0.0f;
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    // Unpack the 6-bit scales (bytes 0..7) and mins (bytes 8..15).
    uint8_t sm[16];
    k4_scales_mins(x[i].scales, sm);
    const __m128i mins = _mm_cvtepu8_epi16(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(sm + 8)));
    const __m256i q8sums = load256(y[i].bsums);
    const __m128i q8s =
        _mm_hadd_epi16(_mm256_extracti128_si256(q8sums, 0), _mm256_extracti128_si256(q8sums, 1));
    __m128i pm = _mm_madd_epi16(mins, q8s);
    pm = _mm_add_epi32(pm, _mm_srli_si128(pm, 8));
    pm = _mm_add_epi32(pm, _mm_srli_si128(pm, 4));
    const int imin = _mm_cvtsi128_si32(pm);

    const uint8_t* q4 = x[i].qs;
    const int8_t* q8 = y[i].qs;
    __m256i sumi = _mm256_setzero_si256();
    for (int j = 0; j < kQK_K / 64; ++j) {
      const __m256i q4bits = load256(q4);
      q4 += 32;
      const __m256i q4l = _mm256_and_si256(q4bits, m4);
      const __m256i q4h = _mm256_and_si256(_mm256_srli_epi16(q4bits, 4), m4);
      const __m256i p16l =
          _mm256_madd_epi16(_mm256_set1_epi16(sm[2 * j]), _mm256_maddubs_epi16(q4l, load256(q8)));
      q8 += 32;
      const __m256i p16h =
          _mm256_madd_epi16(_mm256_set1_epi16(sm[2 * j + 1]), _mm256_maddubs_epi16(q4h, load256(q8)));
      q8 += 32;
      sumi = _mm256_add_epi32(sumi, _mm256_add_epi32(p16l, p16h));
    }
    acc = std::fma(static_cast<float>(hsum_i32_8(sumi)), f16_to_f32(x[i].d) * y[i].d, acc);
    acc_min = std::fma(static_cast<float>(imin), f16_to_f32(x[i].dmin) * y[i].d, acc_min);
  }
  *s = acc - acc_min;
}

void vec_dot_q4_K_q8_K_rows8_x4_avx2(int64_t n, float* s, const BlockQ4_K* x, const BlockQ8_K* y) {
  const __m256i m4 = _mm256_set1_epi8(0xF);
  float acc = 0.0f, acc_min = 0.0f;
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    uint8_t sm[16];  // scales 0..7, mins 8..15
    k4_scales_mins(x[i].scales, sm);
    const float d = f16_to_f32(x[i].d) * y[i].d;
    const float dmin = f16_to_f32(x[i].dmin) * y[i].d;
    const uint8_t* q4 = x[i].qs;
    const int8_t* q8 = y[i].qs;
    const int16_t* bs = y[i].bsums;
    for (int sb = 0; sb < kQK_K / 64; ++sb) {
      const __m256i q4bits = load256(q4 + 32 * sb);
      const __m256i q4l = _mm256_and_si256(q4bits, m4);
      const __m256i q4h = _mm256_and_si256(_mm256_srli_epi16(q4bits, 4), m4);
      const __m256i p16l =
          _mm256_madd_epi16(_mm256_set1_epi16(sm[2 * sb]), _mm256_maddubs_epi16(q4l, load256(q8 + 64 * sb)));
      const __m256i p16h = _mm256_madd_epi16(_mm256_set1_epi16(sm[2 * sb + 1]),
                                             _mm256_maddubs_epi16(q4h, load256(q8 + 64 * sb + 32)));
      const int isum = hsum_i32_8(_mm256_add_epi32(p16l, p16h));
      const int imin =
          sm[8 + 2 * sb] * (bs[4 * sb] + bs[4 * sb + 1]) + sm[9 + 2 * sb] * (bs[4 * sb + 2] + bs[4 * sb + 3]);
      acc = std::fma(static_cast<float>(isum), d, acc);
      acc_min = std::fma(static_cast<float>(imin), dmin, acc_min);
    }
  }
  *s = acc - acc_min;
}

}  // namespace kiln::quant
