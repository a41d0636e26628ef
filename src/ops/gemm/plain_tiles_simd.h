// The kernels of the plain legacy families (layouts.h: Q8_0, Q4_1, Q5_0, Q5_1), written once for
// AVX2 and AVX-512 VNNI, two weight rows by up to four activation rows at a time: each weight block
// is unpacked once for the four activation rows and each activation block loaded once for the two
// weight rows, but every output keeps its own 8-lane accumulator (and min sum), so it takes exactly
// the operations of plain_tiles.cpp's scalar kernel. A tile of one activation row (one-token
// products) goes four weight rows at a time instead (legacy_row), with the same operations. The
// products' four-byte sums are int_steps_simd.h's dot_u8_i8 (vpdpbusd on VNNI; exact at both
// levels: the unsigned operand is at most 128), so both levels give the same bits. Include only
// from plain_tiles_avx2.cpp and plain_tiles_avx512.cpp (internal linkage).
#pragma once

#include <immintrin.h>

#include <cstdint>

#include "ops/gemm/avx2_util.h"
#include "ops/gemm/layouts.h"
#include "ops/quant/int_steps_simd.h"
#include "ops/quant/legacy_avx2.h"
#include "ops/quant/prefetch.h"

namespace kiln::gemm {
namespace {  // NOLINT: internal linkage on purpose (see above)

inline const char* row_of(const Tile& t, int64_t i) { return t.w + static_cast<size_t>(i) * t.w_stride; }
inline const char* act_of(const Tile& t, int64_t r) { return t.act + static_cast<size_t>(r) * t.act_stride; }

inline __m256i load32(const void* p) { return _mm256_loadu_si256(static_cast<const __m256i*>(p)); }

// Each type: its blocks' levels as bytes (kSigned: -128..127, the products then take |w| and the
// activation with w's sign; else 0..31, multiplied as unsigned bytes), its activations' scale, and
// whether a block adds the min term m_w * s_a.
struct Q8_0 {
  using Block = quant::BlockQ8_0;
  using Act = ActQ8_0;
  static constexpr bool kSigned = true, kMin = false;
  static __m256i levels(const Block& b) { return load32(b.qs); }
  static float act_d(const Act& a) { return a.d; }
};
struct Q5_0 {
  using Block = quant::BlockQ5_0;
  using Act = quant::BlockQ8_0;
  static constexpr bool kSigned = true, kMin = false;
  static __m256i levels(const Block& b) { return quant::q5_0_levels(b); }
  static float act_d(const Act& a) { return _cvtsh_ss(a.d); }
};
struct Q4_1 {
  using Block = quant::BlockQ4_1;
  using Act = quant::BlockQ8_1;
  static constexpr bool kSigned = false, kMin = true;
  static __m256i levels(const Block& b) { return quant::bytes_from_nibbles_32(b.qs); }
  static float act_d(const Act& a) { return _cvtsh_ss(a.d); }
};
struct Q5_1 {
  using Block = quant::BlockQ5_1;
  using Act = quant::BlockQ8_1;
  static constexpr bool kSigned = false, kMin = true;
  static __m256i levels(const Block& b) { return quant::q5_1_levels(b); }
  static float act_d(const Act& a) { return _cvtsh_ss(a.d); }
};

// Weight rows i0 .. i0+NI-1 x activation rows r0 .. r0+NR-1: per block and lane,
// fma(d_w * d_a, float(sum of 4 products), lane); types with a min add m_w * s_a per block to a
// float sum, added after the lanes' hsum.
template <class T, int NI, int NR>
void legacy_tile(const Tile& t, int64_t i0, int64_t r0) {
  const int64_t nb = t.k / 32;
  const typename T::Block* w[NI];
  const typename T::Act* a[NR];
  for (int i = 0; i < NI; ++i) w[i] = reinterpret_cast<const typename T::Block*>(row_of(t, i0 + i));
  for (int r = 0; r < NR; ++r) a[r] = reinterpret_cast<const typename T::Act*>(act_of(t, r0 + r));
  __m256 acc[NI][NR];
  __m128 mins[NI];  // lane r: the min sum of activation row r0 + r
  for (int i = 0; i < NI; ++i) {
    mins[i] = _mm_setzero_ps();
    for (int r = 0; r < NR; ++r) acc[i][r] = _mm256_setzero_ps();
  }
  for (int64_t b = 0; b < nb; ++b) {
    __m256i wx[NI], wu[NI];  // the levels, and the unsigned operand of the products
    __m256 dw[NI];           // the weight scale in every lane: d_w * d_a is then one vector multiply
    for (int i = 0; i < NI; ++i) {
      wx[i] = T::levels(w[i][b]);
      wu[i] = T::kSigned ? _mm256_sign_epi8(wx[i], wx[i]) : wx[i];
      dw[i] = _mm256_set1_ps(_cvtsh_ss(w[i][b].d));
    }
    if constexpr (T::kMin) {
      // m_w * s_a and the add, lane by lane: each lane takes the scalar kernel's two roundings.
      alignas(16) float s[4] = {};
      for (int r = 0; r < NR; ++r) s[r] = _cvtsh_ss(a[r][b].s);
      const __m128 sa = _mm_load_ps(s);
      for (int i = 0; i < NI; ++i)
        mins[i] = _mm_add_ps(mins[i], _mm_mul_ps(_mm_set1_ps(_cvtsh_ss(w[i][b].m)), sa));
    }
    for (int r = 0; r < NR; ++r) {
      const __m256i y = load32(a[r][b].qs);
      const __m256 da = _mm256_set1_ps(T::act_d(a[r][b]));
      for (int i = 0; i < NI; ++i) {
        // The products of w and y, summed four at a time (exact).
        const __m256i s = T::kSigned ? _mm256_sign_epi8(y, wx[i]) : y;
        const __m256i sum = quant::dot_u8_i8(wu[i], s);
        acc[i][r] = _mm256_fmadd_ps(_mm256_mul_ps(dw[i], da), _mm256_cvtepi32_ps(sum), acc[i][r]);
      }
    }
  }
  for (int i = 0; i < NI; ++i) {
    alignas(16) float m[4];
    _mm_store_ps(m, mins[i]);
    for (int r = 0; r < NR; ++r) {
      if constexpr (T::kMin)
        store1(t, r0 + r, i0 + i, hsum8(acc[i][r]) + m[r]);
      else
        store1(t, r0 + r, i0 + i, hsum8(acc[i][r]));
    }
  }
}

// An F16 value in every lane (exact).
inline __m256 broadcast_f16(uint16_t h) { return _mm256_cvtph_ps(_mm_set1_epi16(static_cast<short>(h))); }

// One activation row r against weight rows i0 .. i0+NI-1 (one-token products): per output the
// operations of legacy_tile, so its bits; NI outputs at a time keep NI independent FMA chains in
// flight, and the min terms are scalar sums. The NI rows lie one after another, and read side by
// side they are NI short streams, which the AVX-512 machine of docs/performance.md follows poorly:
// each block step also prefetches the next NI rows' bytes in order, so memory sees one stream.
template <class T, int NI>
void legacy_row(const Tile& t, int64_t i0, int64_t r) {
  using Block = typename T::Block;
  const int64_t nb = t.k / 32;
  const Block* w[NI];
  for (int i = 0; i < NI; ++i) w[i] = reinterpret_cast<const Block*>(row_of(t, i0 + i));
  const auto* a = reinterpret_cast<const typename T::Act*>(act_of(t, r));
  const char* next = row_of(t, i0 + NI);
  constexpr size_t kNextStep = NI * sizeof(Block);  // of the next rows' bytes per block step
  __m256 acc[NI];
  float mins[NI];
  for (int i = 0; i < NI; ++i) {
    acc[i] = _mm256_setzero_ps();
    mins[i] = 0.0f;
  }
  for (int64_t b = 0; b < nb; ++b) {
    quant::prefetch_block<kNextStep>(next + static_cast<size_t>(b) * kNextStep);
    const __m256i y = load32(a[b].qs);
    const __m256 da = _mm256_set1_ps(T::act_d(a[b]));
    for (int i = 0; i < NI; ++i) {
      const __m256i wx = T::levels(w[i][b]);
      const __m256i wu = T::kSigned ? _mm256_sign_epi8(wx, wx) : wx;
      const __m256i sum = quant::dot_u8_i8(wu, T::kSigned ? _mm256_sign_epi8(y, wx) : y);
      acc[i] = _mm256_fmadd_ps(_mm256_mul_ps(broadcast_f16(w[i][b].d), da), _mm256_cvtepi32_ps(sum), acc[i]);
      if constexpr (T::kMin) mins[i] += _cvtsh_ss(w[i][b].m) * _cvtsh_ss(a[b].s);
    }
  }
  for (int i = 0; i < NI; ++i) store1(t, r, i0 + i, T::kMin ? hsum8(acc[i]) + mins[i] : hsum8(acc[i]));
}

template <class T>
void legacy_tiles(const Tile& t) {
  if (t.n_act == 1) {
    int64_t i = 0;
    for (; i + 4 <= t.n_rows; i += 4) legacy_row<T, 4>(t, i, 0);
    for (; i < t.n_rows; ++i) legacy_row<T, 1>(t, i, 0);
    return;
  }
  for_tiles<2>(t.n_rows, t.n_act,
               [&]<int NI, int NR>(int64_t i0, int64_t r0) { legacy_tile<T, NI, NR>(t, i0, r0); });
}

}  // namespace

}  // namespace kiln::gemm

// Defines layouts.h's gemm_q8_0_<LEVEL>, gemm_q5_0_, gemm_q4_1_ and gemm_q5_1_ (inside namespace
// kiln::gemm) for the including file's level: one list for both levels.
#define KILN_DEFINE_PLAIN_TILES(LEVEL)                                  \
  void gemm_q8_0_##LEVEL(const Tile& t) { legacy_tiles<Q8_0>(t); } \
  void gemm_q5_0_##LEVEL(const Tile& t) { legacy_tiles<Q5_0>(t); } \
  void gemm_q4_1_##LEVEL(const Tile& t) { legacy_tiles<Q4_1>(t); } \
  void gemm_q5_1_##LEVEL(const Tile& t) { legacy_tiles<Q5_1>(t); }
