// The tiles of eight weight rows and four activation rows (vec_dot_rows8_x4_8x4) for the 4-bit
// formats of 32 values with one F16 scale, Q4_0 and IQ4_NL (x Q8_0), with the eight rows' blocks
// laid out one row per 32-bit lane so that a dot product of four bytes with four activation bytes
// broadcast to every lane adds to all eight rows' sums at once (no horizontal reductions). The two
// types differ only in how a nibble becomes a level (Q4_0: q - 8; IQ4_NL: a table lookup) and so
// in the integer step, which the ISA files supply; the lane layout and the float work are shared.
// Include only from files compiled for AVX2 (the *_avx2.cpp / *_avx512.cpp rule in CMakeLists).
#pragma once

#include <immintrin.h>

#include <cstddef>
#include <cstdint>

#include "ops/quant/blocks.h"

namespace kiln::quant {
// Internal linkage: files compiled for AVX2 and for AVX-512 include this, and no copy compiled for
// one may stand in for the other's caller.
namespace {  // NOLINT

// Block: BlockQ4_0 or BlockIQ4NL (an F16 scale d; qs[j] holds element j in its low nibble and
// element j + 16 in its high one). w[k] lane i = the nibbles q of elements 4k..4k+3 of block b[i]
// (bytes, 0..15); the result is the eight scales d as floats, lane i = b[i]->d.
template <class Block>
inline __m256 load_nibbles_rows8(const Block* const b[8], __m256i w[8]) {
  // Rows i and i + 4 share a register; a 4x4 dword transpose in each 128-bit half then gives
  // packed[m] lane i = dword m of b[i]->qs (the low nibbles are elements 4m.., the high 16 + 4m..).
  __m256i r[4];
  for (int i = 0; i < 4; ++i) {
    r[i] = _mm256_inserti128_si256(
        _mm256_castsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b[i]->qs))),
        _mm_loadu_si128(reinterpret_cast<const __m128i*>(b[i + 4]->qs)), 1);
  }
  const __m256i a0 = _mm256_unpacklo_epi32(r[0], r[1]), a1 = _mm256_unpackhi_epi32(r[0], r[1]);
  const __m256i a2 = _mm256_unpacklo_epi32(r[2], r[3]), a3 = _mm256_unpackhi_epi32(r[2], r[3]);
  const __m256i packed[4] = {_mm256_unpacklo_epi64(a0, a2), _mm256_unpackhi_epi64(a0, a2),
                             _mm256_unpacklo_epi64(a1, a3), _mm256_unpackhi_epi64(a1, a3)};
  const __m256i low4 = _mm256_set1_epi8(0x0F);
  for (int m = 0; m < 4; ++m) {
    w[m] = _mm256_and_si256(packed[m], low4);
    w[m + 4] = _mm256_and_si256(_mm256_srli_epi16(packed[m], 4), low4);
  }
  return _mm256_cvtph_ps(_mm_set_epi16(static_cast<int16_t>(b[7]->d), static_cast<int16_t>(b[6]->d),
                                       static_cast<int16_t>(b[5]->d), static_cast<int16_t>(b[4]->d),
                                       static_cast<int16_t>(b[3]->d), static_cast<int16_t>(b[2]->d),
                                       static_cast<int16_t>(b[1]->d), static_cast<int16_t>(b[0]->d)));
}

// Four activation bytes y[4k..4k+3] in every 32-bit lane.
inline __m256i broadcast_y4(const int8_t* y, int k) {
  int32_t v;
  __builtin_memcpy(&v, y + 4 * k, sizeof(v));
  return _mm256_set1_epi32(v);
}

// Output (i, r) = the rows8 dot product (vec_dot_rows8.cpp: vec_dot_q4_0_q8_0_rows8 or
// vec_dot_iq4_nl_q8_0_rows8) of row x_i and activation y_r, bit for bit: lane i of acc[r] takes
// acc = fma(float(isum), d_x * d_y, acc) per block in order, as the scalar references do (ggml's
// repacked 8-row gemv and 4-row gemm kernels alike). Per block of the eight rows,
// unpack(w) turns the nibbles (load_nibbles_rows8) into whatever row_sums reads, once for the four
// activation rows; row_sums(unpacked, y) returns, lane i, the block's exact integer sum of level * y
// of row i for the 32 activation bytes y, by any exact means.
template <class Block, class Unpack, class RowSums>
inline void rows8_q8_0_8x4(int64_t n, float* s, size_t s_stride, const Block* x, size_t x_stride,
                           const BlockQ8_0* y, size_t y_stride, Unpack unpack, RowSums row_sums) {
  const int64_t nb = n / kQK8_0;
  const Block* xs[8];
  const BlockQ8_0* ys[4];
  for (int i = 0; i < 8; ++i)
    xs[i] = reinterpret_cast<const Block*>(reinterpret_cast<const char*>(x) + i * x_stride);
  for (int r = 0; r < 4; ++r)
    ys[r] = reinterpret_cast<const BlockQ8_0*>(reinterpret_cast<const char*>(y) + r * y_stride);
  __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
  for (int64_t ib = 0; ib < nb; ++ib) {
    const Block* blocks[8];
    for (int i = 0; i < 8; ++i) blocks[i] = xs[i] + ib;
    __m256i w[8];
    const __m256 dx = load_nibbles_rows8(blocks, w);
    const auto levels = unpack(w);
    for (int r = 0; r < 4; ++r) {
      const __m256i isum = row_sums(levels, ys[r][ib].qs);
      const __m256 dy = _mm256_broadcastss_ps(_mm_cvtph_ps(_mm_cvtsi32_si128(ys[r][ib].d)));
      acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), _mm256_mul_ps(dx, dy), acc[r]);
    }
  }
  for (int r = 0; r < 4; ++r)
    _mm256_storeu_ps(reinterpret_cast<float*>(reinterpret_cast<char*>(s) + r * s_stride), acc[r]);
}

// Q4_0's tile: row_sums(w, y) reads the unsigned nibbles themselves (the level is q - 8).
template <class RowSums>
inline void q4_0_q8_0_rows8_8x4(int64_t n, float* s, size_t s_stride, const BlockQ4_0* x, size_t x_stride,
                                const BlockQ8_0* y, size_t y_stride, RowSums row_sums) {
  rows8_q8_0_8x4(
      n, s, s_stride, x, x_stride, y, y_stride, [](const __m256i* w) { return w; }, row_sums);
}

// sum(y[0..32)) in every 32-bit lane, from its eight partial sums.
inline __m256i broadcast_sum_i32x8(__m256i partial) {
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(partial), _mm256_extracti128_si256(partial, 1));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, _MM_SHUFFLE(1, 0, 3, 2)));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, _MM_SHUFFLE(2, 3, 0, 1)));
  return _mm256_broadcastd_epi32(s);
}

}  // namespace
}  // namespace kiln::quant
