// AVX2 kernels of the Split16 families' one-row order (layouts.h rows_*_split16_avx2): every output
// gets exactly the bits of its type's split vec_dot (quant/kernels.h vec_dot_*_split16_avx2), for
// several activation rows per read of a weight row, so that single_row_order and one-token products
// no longer read each weight row once per activation row.
//
// The vec_dot's main loop (vec_dot_avx2.cpp accumulate_steps) over split rows of n values: with
// K = 2 KH accumulators of eight lanes and np = n rounded down to 16 KH, it takes the first halves
// of both rows (positions [0, np / 2)) eight values at a time, chunk c into accumulator 2 (c % KH),
// then the second halves ([n / 2, n / 2 + np / 2)) alike into accumulator 2 (c % KH) + 1. Here each
// output keeps the same KH accumulators per half and takes the same FMAs in the same order; one
// weight vector serves the tile's activation rows. The end is the vec_dot's: where np < n, its own
// finish function (the reduction and the values past np); where np = n (every model shape), its
// reduction computed here half by half, which is the same sums in the same order:
//   F16, F32 (reduce_16_lanes): per half, (a0 + a2) + (a1 + a3) of its four accumulators, then
//            hsum_float_8(second + first);
//   BF16 (reduce_4x8):          per half, a0 + a1, then hsum_float_8(first + second).
// Compiled for AVX2 + FMA + F16C.
#include <immintrin.h>

#include <algorithm>
#include <cstdint>

#include "ops/gemm/avx2_util.h"
#include "ops/gemm/layouts.h"
#include "ops/quant/kernels.h"

namespace kiln::gemm {
namespace {

// The three types: their values widened to F32 (exact), the vec_dot's accumulators per half, its
// reduction of one half's accumulators and of the two halves, and its end.
struct F16Rows {
  using Elem = uint16_t;
  static constexpr int kHalfAccs = 4;
  static __m256 load(const Elem* p) {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  }
  static __m256 reduce_half(const __m256 (&a)[kHalfAccs]) {
    return _mm256_add_ps(_mm256_add_ps(a[0], a[2]), _mm256_add_ps(a[1], a[3]));
  }
  static float reduce(__m256 first, __m256 second) { return hsum8(_mm256_add_ps(second, first)); }
  static float finish(int64_t n, const float* lanes, const Elem* w, const Elem* a) {
    return quant::vec_dot_f16_split16_finish_avx2(n, lanes, w, a);
  }
};
struct BF16Rows {
  using Elem = uint16_t;
  static constexpr int kHalfAccs = 2;
  static __m256 load(const Elem* p) {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
  }
  static __m256 reduce_half(const __m256 (&a)[kHalfAccs]) { return _mm256_add_ps(a[0], a[1]); }
  static float reduce(__m256 first, __m256 second) { return hsum8(_mm256_add_ps(first, second)); }
  static float finish(int64_t n, const float* lanes, const Elem* w, const Elem* a) {
    return quant::vec_dot_bf16_split16_finish_avx2(n, lanes, w, a);
  }
};
struct F32Rows {
  using Elem = float;
  static constexpr int kHalfAccs = 4;
  static __m256 load(const Elem* p) { return _mm256_loadu_ps(p); }
  static __m256 reduce_half(const __m256 (&a)[kHalfAccs]) { return F16Rows::reduce_half(a); }
  static float reduce(__m256 first, __m256 second) { return F16Rows::reduce(first, second); }
  static float finish(int64_t n, const float* lanes, const Elem* w, const Elem* a) {
    return quant::vec_dot_f32_split16_finish_avx2(n, lanes, w, a);
  }
};

template <class Type>
struct SplitRows {
  using Elem = typename Type::Elem;
  static constexpr int KH = Type::kHalfAccs;
  static constexpr int64_t kRound = 8 * KH;  // positions of a half per round
  // Activation rows per tile: KH accumulators each, at most 12 of the 16 registers.
  static constexpr int kMaxA = std::min(4, 12 / KH);

  // One half of the rows (positions [base, base + half_np)): the half's KH accumulators of weight
  // row w and the NA activation rows a.
  template <int NA>
  static void half_pass(const Elem* w, const Elem* const (&a)[NA], int64_t base, int64_t half_np,
                        __m256 (&acc)[NA][KH]) {
    for (int r = 0; r < NA; ++r)
      for (int c = 0; c < KH; ++c) acc[r][c] = _mm256_setzero_ps();
    for (int64_t p = base; p < base + half_np; p += kRound)
      for (int c = 0; c < KH; ++c) {
        const __m256 wv = Type::load(w + p + 8 * c);
        for (int r = 0; r < NA; ++r) acc[r][c] = _mm256_fmadd_ps(wv, Type::load(a[r] + p + 8 * c), acc[r][c]);
      }
  }

  // Outputs of weight row i and activation rows r0 .. r0 + NA - 1.
  template <int NA>
  static void outputs(const Tile& t, int64_t i, int64_t r0) {
    const auto* w = reinterpret_cast<const Elem*>(t.w + static_cast<size_t>(i) * t.w_stride);
    const Elem* a[NA];
    for (int r = 0; r < NA; ++r)
      a[r] = reinterpret_cast<const Elem*>(t.act + static_cast<size_t>(r0 + r) * t.act_stride);
    const int64_t half_np = (t.k & ~(2 * kRound - 1)) / 2;
    __m256 acc[NA][KH];
    if (2 * half_np == t.k) {
      __m256 first[NA];
      half_pass<NA>(w, a, 0, half_np, acc);
      for (int r = 0; r < NA; ++r) first[r] = Type::reduce_half(acc[r]);
      half_pass<NA>(w, a, t.k / 2, half_np, acc);
      for (int r = 0; r < NA; ++r) store1(t, r0 + r, i, Type::reduce(first[r], Type::reduce_half(acc[r])));
      return;
    }
    // The finish functions' half-major order: the first half's accumulators, then the second's.
    alignas(32) float lanes[NA][2 * KH * 8];
    for (int h = 0; h < 2; ++h) {
      half_pass<NA>(w, a, h * (t.k / 2), half_np, acc);
      for (int r = 0; r < NA; ++r)
        for (int c = 0; c < KH; ++c) _mm256_store_ps(lanes[r] + 8 * (h * KH + c), acc[r][c]);
    }
    for (int r = 0; r < NA; ++r) store1(t, r0 + r, i, Type::finish(t.k, lanes[r], w, a[r]));
  }

  // Weight row i against the na <= kMaxA activation rows from r0.
  template <int NA = kMaxA>
  static void group(const Tile& t, int64_t i, int64_t r0, int64_t na) {
    if constexpr (NA > 1) {
      if (na < NA) return group<NA - 1>(t, i, r0, na);
    }
    outputs<NA>(t, i, r0);
  }

  // Activation rows r0 .. n_act - 1 against every weight row of the tile, kMaxA activation rows at
  // a time (the outer loop: they stay in L1 while the tile's weight rows, kept in L2 after the
  // first group, pass). The other order streams the activation rows through L2 for every weight
  // row and was no faster than one row at a time.
  static void run(const Tile& t, int64_t r0) {
    for (int64_t r = r0; r < t.n_act; r += kMaxA) {
      const int64_t na = std::min<int64_t>(kMaxA, t.n_act - r);
      for (int64_t i = 0; i < t.n_rows; ++i) group(t, i, r, na);
    }
  }
};

}  // namespace

void rows_f16_split16_avx2(const Tile& t, int64_t r0) { SplitRows<F16Rows>::run(t, r0); }
void rows_bf16_split16_avx2(const Tile& t, int64_t r0) { SplitRows<BF16Rows>::run(t, r0); }
void rows_f32_split16_avx2(const Tile& t, int64_t r0) { SplitRows<F32Rows>::run(t, r0); }

}  // namespace kiln::gemm
