// AVX2 kernels of the float prompt families (layouts.h: F16, BF16, F32 weights in tinyBLAS's order):
// - plain rows: activation rows four at a time against the tile's weight rows three at a time (12
//   accumulators, 3 weight vectors and one activation vector: the 16 registers), in chunks of the row
//   that keep the widened activation rows in L1. Each output's sixteen lanes are two 8-lane
//   accumulators, lanes 0..7 and 8..15 of every 16-value step, advanced one after the other and kept
//   in memory between chunks;
// - Split16 rows (each half of the sixteen lanes reads one contiguous half of the row): weight rows
//   four at a time against activation rows three at a time, one 8-lane accumulator per output and
//   half, tinyBLAS's AVX2 tile shape.
// In both, lanes never meet before the reduction and each takes its steps in order, so every lane
// takes exactly the FMAs of float_tiles.cpp's scalar kernels. Also the activation conversions of
// the F16 and BF16 families. Compiled for AVX2 + FMA + F16C; uses no inline function of a shared
// header (kernels.h's split16_pos has internal linkage).
#include <immintrin.h>

#include <algorithm>
#include <cstdint>

#include "core/half.h"  // only its out-of-line row conversions
#include "ops/gemm/avx2_util.h"
#include "ops/gemm/layouts.h"
#include "ops/quant/kernels.h"  // split16_pos (internal linkage)

namespace kiln::gemm {
namespace {

// Eight weights from value l of a row, widened to F32 (exact).
// F16 and BF16 also round F32 activations to their type (round8: eight values, as the type's
// vec_dot_type conversion; round_row / widen_row: the portable row conversions, for tails).
struct F16Weights {
  static __m256 widen8(__m128i h) { return _mm256_cvtph_ps(h); }
  static __m256 load8(const char* row, int64_t l) {
    return widen8(_mm_loadu_si128(reinterpret_cast<const __m128i*>(row + 2 * l)));
  }
  static __m128i round8(__m256 x) { return _mm256_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT); }
  static void round_row(const float* x, uint16_t* h, int64_t n) { f32_to_f16_row(x, h, n); }
  static void widen_row(const uint16_t* h, float* y, int64_t n) { f16_to_f32_row(h, y, n); }
};
struct BF16Weights {
  static __m256 widen8(__m128i h) { return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16)); }
  static __m256 load8(const char* row, int64_t l) {
    return widen8(_mm_loadu_si128(reinterpret_cast<const __m128i*>(row + 2 * l)));
  }
  // f32_to_bf16: round to nearest even on the upper 16 bits; a NaN truncated and made quiet.
  static __m128i round8(__m256 x) {
    const __m256i one = _mm256_set1_epi32(1), round = _mm256_set1_epi32(0x7fff);
    const __m256i abs_mask = _mm256_set1_epi32(0x7fffffff), inf = _mm256_set1_epi32(0x7f800000);
    const __m256i quiet = _mm256_set1_epi32(64);
    const __m256i u = _mm256_castps_si256(x);
    const __m256i hi = _mm256_srli_epi32(u, 16);
    const __m256i rounded =
        _mm256_srli_epi32(_mm256_add_epi32(u, _mm256_add_epi32(round, _mm256_and_si256(hi, one))), 16);
    const __m256i nan = _mm256_cmpgt_epi32(_mm256_and_si256(u, abs_mask), inf);
    const __m256i h = _mm256_blendv_epi8(rounded, _mm256_or_si256(hi, quiet), nan);
    return _mm256_castsi256_si128(_mm256_permute4x64_epi64(_mm256_packus_epi32(h, h), 0x08));
  }
  static void round_row(const float* x, uint16_t* h, int64_t n) { f32_to_bf16_row(x, h, n); }
  static void widen_row(const uint16_t* h, float* y, int64_t n) { bf16_to_f32_row(h, y, n); }
};
struct F32Weights {
  static __m256 load8(const char* row, int64_t l) {
    return _mm256_loadu_ps(reinterpret_cast<const float*>(row + 4 * l));
  }
};

constexpr int64_t kChunk = 512;    // values of a row per pass (the activation rows' part in L1)
constexpr int64_t kRowBlock = 16;  // weight rows whose accumulators wait in memory between chunks

// Lanes `half * 8` .. + 7 of the 16-value steps in [l0, l1), continuing the sums in acc.
template <class W, int NI, int NR>
void tile_half(const char* const (&w)[NI], const float* const (&a)[NR], int64_t l0, int64_t l1, int half,
               __m256 (&acc)[kRowBlock][4][2], int64_t i0) {
  __m256 c[NI][NR];
  for (int i = 0; i < NI; ++i)
    for (int r = 0; r < NR; ++r) c[i][r] = acc[i0 + i][r][half];
  for (int64_t l = l0 + 8 * half; l < l1; l += 16) {
    __m256 wv[NI];
    for (int i = 0; i < NI; ++i) wv[i] = W::load8(w[i], l);
    for (int r = 0; r < NR; ++r) {
      __m256 av = _mm256_loadu_ps(a[r] + l);
      // One load per activation vector: without this GCC folds the load into every FMA that uses it,
      // which makes the loop wait on loads rather than FMAs.
      asm("" : "+x"(av));
      for (int i = 0; i < NI; ++i) c[i][r] = _mm256_fmadd_ps(wv[i], av, c[i][r]);
    }
  }
  for (int i = 0; i < NI; ++i)
    for (int r = 0; r < NR; ++r) acc[i0 + i][r][half] = c[i][r];
}

// Weight rows b0 .. b0 + nb - 1 (nb <= kRowBlock) against the NR activation rows a
// (rows r0 ..): chunk by chunk, two weight rows at a time, both halves.
template <class W, int NR>
void tile_block(const Tile& t, const float* const (&a)[NR], int64_t b0, int64_t nb, int64_t r0) {
  __m256 acc[kRowBlock][4][2];
  for (int64_t i = 0; i < nb; ++i)
    for (int r = 0; r < NR; ++r) acc[i][r][0] = acc[i][r][1] = _mm256_setzero_ps();
  auto row = [&](int64_t i) { return t.w + static_cast<size_t>(b0 + i) * t.w_stride; };
  for (int64_t l0 = 0; l0 < t.k; l0 += kChunk) {
    const int64_t l1 = std::min(t.k, l0 + kChunk);
    int64_t i = 0;
    for (; nb - i >= 5 || nb - i == 3; i += 3) {
      const char* const w[3] = {row(i), row(i + 1), row(i + 2)};
      tile_half<W, 3, NR>(w, a, l0, l1, 0, acc, i);
      tile_half<W, 3, NR>(w, a, l0, l1, 1, acc, i);
    }
    for (; i + 2 <= nb; i += 2) {
      const char* const w[2] = {row(i), row(i + 1)};
      tile_half<W, 2, NR>(w, a, l0, l1, 0, acc, i);
      tile_half<W, 2, NR>(w, a, l0, l1, 1, acc, i);
    }
    for (; i < nb; ++i) {
      const char* const w[1] = {row(i)};
      tile_half<W, 1, NR>(w, a, l0, l1, 0, acc, i);
      tile_half<W, 1, NR>(w, a, l0, l1, 1, acc, i);
    }
  }
  for (int64_t i = 0; i < nb; ++i)
    for (int r = 0; r < NR; ++r) store1(t, r0 + r, b0 + i, hsum8(_mm256_add_ps(acc[i][r][1], acc[i][r][0])));
}

template <class W>
void gemm_tinyblas_avx2(const Tile& t) {
  for_act_groups(t.n_act, [&]<int NR>(int64_t r0) {
    const float* a[NR];
    for (int r = 0; r < NR; ++r)
      a[r] = reinterpret_cast<const float*>(t.act + static_cast<size_t>(r0 + r) * t.act_stride);
    for (int64_t b0 = 0; b0 < t.n_rows; b0 += kRowBlock)
      tile_block<W, NR>(t, a, b0, std::min(kRowBlock, t.n_rows - b0), r0);
  });
}

// Split rows (layouts.h Split16): c[i][r] += weight row i x activation row r over the values at
// [l0, l1) of both, eight at a time (one lane per value of a half step); the activations are of the
// weights' type (16-bit ones widened as they load, as tinyBLAS's AVX2 kernel loads both). NI x NR
// accumulators, NR activation vectors and one weight vector: at most the 16 registers (NI = 4,
// NR = 3, tinyBLAS's AVX2 tile).
template <class W, int NI, int NR>
inline void split_pass(const char* const (&w)[NI], const char* const (&a)[NR], int64_t l0, int64_t l1,
                       __m256 (&c)[NI][NR]) {
  for (int64_t l = l0; l < l1; l += 8) {
    __m256 av[NR];
    for (int r = 0; r < NR; ++r) av[r] = W::load8(a[r], l);
    for (int i = 0; i < NI; ++i) {
      const __m256 wv = W::load8(w[i], l);
      for (int r = 0; r < NR; ++r) c[i][r] = _mm256_fmadd_ps(wv, av[r], c[i][r]);
    }
  }
}

// Outputs of weight rows i0 .. i0 + NI - 1 and activation rows r0 .. r0 + NR - 1: lanes 0..7 of
// the sixteen over the first half of the rows, lanes 8..15 over the second, then hi + lo reduced as
// hsum_float_8 (the order of float_tiles.cpp's scalar kernels).
template <class W, int NI, int NR>
void split_tile(const Tile& t, int64_t i0, int64_t r0) {
  const char* w[NI];
  const char* a[NR];
  for (int i = 0; i < NI; ++i) w[i] = t.w + static_cast<size_t>(i0 + i) * t.w_stride;
  for (int r = 0; r < NR; ++r) a[r] = t.act + static_cast<size_t>(r0 + r) * t.act_stride;
  __m256 lo[NI][NR], c[NI][NR];
  for (int i = 0; i < NI; ++i)
    for (int r = 0; r < NR; ++r) c[i][r] = _mm256_setzero_ps();
  split_pass<W, NI, NR>(w, a, 0, t.k / 2, c);
  for (int i = 0; i < NI; ++i)
    for (int r = 0; r < NR; ++r) {
      lo[i][r] = c[i][r];
      c[i][r] = _mm256_setzero_ps();
    }
  split_pass<W, NI, NR>(w, a, t.k / 2, t.k, c);
  for (int i = 0; i < NI; ++i)
    for (int r = 0; r < NR; ++r) store1(t, r0 + r, i0 + i, hsum8(_mm256_add_ps(c[i][r], lo[i][r])));
}

template <class W, int NR>
void split_tiles(const Tile& t, int64_t r0) {
  int64_t i = 0;
  for (; i + 4 <= t.n_rows; i += 4) split_tile<W, 4, NR>(t, i, r0);
  switch (t.n_rows - i) {
    case 3:
      split_tile<W, 3, NR>(t, i, r0);
      break;
    case 2:
      split_tile<W, 2, NR>(t, i, r0);
      break;
    case 1:
      split_tile<W, 1, NR>(t, i, r0);
      break;
    default:
      break;
  }
}

// Activation rows three at a time (the outer loop: they stay in L1 while the tile's weight rows,
// kept in L2, pass), against weight rows four at a time.
template <class W>
void gemm_split16_avx2(const Tile& t) {
  int64_t r = 0;
  // Threes, but four left are two pairs: a lone row would load five vectors per four FMAs.
  for (; t.n_act - r >= 5 || t.n_act - r == 3; r += 3) split_tiles<W, 3>(t, r);
  for (; t.n_act - r >= 2; r += 2) split_tiles<W, 2>(t, r);
  if (r < t.n_act) split_tiles<W, 1>(t, r);
}

// The F16 and BF16 families' activations (layouts.h): plain, the widened copy then the 16-bit one.
template <class W>
void wide_row(const float* x, void* dst, int64_t k) {
  auto* wide = static_cast<float*>(dst);
  auto* half = reinterpret_cast<uint16_t*>(wide + k);
  int64_t j = 0;
  for (; j + 8 <= k; j += 8) {
    const __m128i h = W::round8(_mm256_loadu_ps(x + j));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(half + j), h);
    _mm256_storeu_ps(wide + j, W::widen8(h));
  }
  W::round_row(x + j, half + j, k - j);  // the last k % 8 values (out-of-line, portable)
  W::widen_row(half + j, wide + j, k - j);
}

// Split: the 16-bit values only, value e at split16_pos(e, k) (k a multiple of 16).
template <class W>
void half_split16_row(const float* x, void* dst, int64_t k) {
  auto* half = static_cast<uint16_t*>(dst);
  for (int64_t j = 0; j < k; j += 8)
    _mm_storeu_si128(reinterpret_cast<__m128i*>(half + quant::split16_pos(j, k)), W::round8(_mm256_loadu_ps(x + j)));
}

}  // namespace

void convert_act_f16_wide_avx2(const float* x, void* dst, int64_t k) { wide_row<F16Weights>(x, dst, k); }
void convert_act_bf16_wide_avx2(const float* x, void* dst, int64_t k) { wide_row<BF16Weights>(x, dst, k); }
void convert_act_f16_split16_avx2(const float* x, void* dst, int64_t k) { half_split16_row<F16Weights>(x, dst, k); }
void convert_act_bf16_split16_avx2(const float* x, void* dst, int64_t k) {
  half_split16_row<BF16Weights>(x, dst, k);
}

void gemm_f16_avx2(const Tile& t) { gemm_tinyblas_avx2<F16Weights>(t); }
void gemm_bf16_avx2(const Tile& t) { gemm_tinyblas_avx2<BF16Weights>(t); }
void gemm_f32_avx2(const Tile& t) { gemm_tinyblas_avx2<F32Weights>(t); }
void gemm_f16_split16_avx2(const Tile& t) { gemm_split16_avx2<F16Weights>(t); }
void gemm_bf16_split16_avx2(const Tile& t) { gemm_split16_avx2<BF16Weights>(t); }
void gemm_f32_split16_avx2(const Tile& t) { gemm_split16_avx2<F32Weights>(t); }

}  // namespace kiln::gemm
