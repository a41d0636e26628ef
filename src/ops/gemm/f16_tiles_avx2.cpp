// AVX2 kernel of the F16 prompt family (layouts.h): activation rows four at a time against the tile's weight
// rows two at a time, in chunks of the row that keep the widened rows in L1. Each output's sixteen lanes are
// two 8-lane accumulators, lanes 0..7 and 8..15 of every 16-value step, advanced one after the other and kept
// in memory between chunks (lanes never meet before the reduction and each takes its steps in order, so every
// lane takes exactly the FMAs of f16_tiles.cpp's scalar kernel). Compiled for AVX2 + FMA + F16C; uses no
// inline function of a shared header.
#include <immintrin.h>

#include <algorithm>
#include <cstdint>

#include "ops/gemm/avx2_util.h"
#include "ops/gemm/layouts.h"

namespace kiln::gemm {
namespace {

inline __m256 load_f16x8(const uint16_t* p) {
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}

constexpr int64_t kChunk = 512;    // values of a row per pass (the activation rows' part in L1)
constexpr int64_t kRowBlock = 16;  // weight rows whose accumulators wait in memory between chunks

// Lanes `half * 8` .. + 7 of the 16-value steps in [l0, l1), continuing the sums in acc.
template <int NI, int NR>
void f16_half(const uint16_t* const (&w)[NI], const float* const (&a)[NR], int64_t l0, int64_t l1, int half,
              __m256 (&acc)[kRowBlock][4][2], int64_t i0) {
  __m256 c[NI][NR];
  for (int i = 0; i < NI; ++i)
    for (int r = 0; r < NR; ++r) c[i][r] = acc[i0 + i][r][half];
  for (int64_t l = l0 + 8 * half; l < l1; l += 16) {
    __m256 wv[NI];
    for (int i = 0; i < NI; ++i) wv[i] = load_f16x8(w[i] + l);
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
template <int NR>
void f16_block(const Tile& t, const float* const (&a)[NR], int64_t b0, int64_t nb, int64_t r0) {
  __m256 acc[kRowBlock][4][2];
  for (int64_t i = 0; i < nb; ++i)
    for (int r = 0; r < NR; ++r) acc[i][r][0] = acc[i][r][1] = _mm256_setzero_ps();
  auto row = [&](int64_t i) {
    return reinterpret_cast<const uint16_t*>(t.w + static_cast<size_t>(b0 + i) * t.w_stride);
  };
  for (int64_t l0 = 0; l0 < t.k; l0 += kChunk) {
    const int64_t l1 = std::min(t.k, l0 + kChunk);
    int64_t i = 0;
    for (; nb - i >= 5 || nb - i == 3; i += 3) {
      const uint16_t* const w[3] = {row(i), row(i + 1), row(i + 2)};
      f16_half<3, NR>(w, a, l0, l1, 0, acc, i);
      f16_half<3, NR>(w, a, l0, l1, 1, acc, i);
    }
    for (; i + 2 <= nb; i += 2) {
      const uint16_t* const w[2] = {row(i), row(i + 1)};
      f16_half<2, NR>(w, a, l0, l1, 0, acc, i);
      f16_half<2, NR>(w, a, l0, l1, 1, acc, i);
    }
    for (; i < nb; ++i) {
      const uint16_t* const w[1] = {row(i)};
      f16_half<1, NR>(w, a, l0, l1, 0, acc, i);
      f16_half<1, NR>(w, a, l0, l1, 1, acc, i);
    }
  }
  for (int64_t i = 0; i < nb; ++i)
    for (int r = 0; r < NR; ++r) store1(t, r0 + r, b0 + i, hsum8(_mm256_add_ps(acc[i][r][1], acc[i][r][0])));
}

}  // namespace

void gemm_f16_avx2(const Tile& t) {
  for_act_groups(t.n_act, [&]<int NR>(int64_t r0) {
    const float* a[NR];
    for (int r = 0; r < NR; ++r)
      a[r] = reinterpret_cast<const float*>(t.act + static_cast<size_t>(r0 + r) * t.act_stride);
    for (int64_t b0 = 0; b0 < t.n_rows; b0 += kRowBlock)
      f16_block<NR>(t, a, b0, std::min(kRowBlock, t.n_rows - b0), r0);
  });
}

}  // namespace kiln::gemm
