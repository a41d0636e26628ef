// The float part of the Q4_Kx8 kernels (layouts.h), shared by the AVX2 and AVX-512 files: lane i of
// a vector holds weight row i of a group of eight, and takes the scalar kernel's FMAs (gemm_q4_Kx8:
// one per pair of sub-blocks for the prompt rows, one per super-block for the others). The ISA
// files supply the integer step, which any exact means may compute. Include only from files
// compiled for AVX2 or wider (*_avx2.cpp / *_avx512.cpp); everything here has internal linkage, so
// no copy compiled for one ISA can stand in for another's caller.
#pragma once



#include <immintrin.h>

#include <cstdint>

#include "ops/gemm/avx2_util.h"
#include "ops/gemm/layouts.h"

namespace kiln::gemm {
namespace {  // NOLINT: internal linkage on purpose (see above)

// Outputs of activation rows a[0 .. NR-1] x the eight weight rows of `group`. pair_sums.operator()<NR>
// (h, qs, p, a, s, out) stores in out[r], lane i, row i's exact sum over sub-blocks j = 2p, 2p + 1 of
// h.scales[j][i] * sum(level * activation) against a[r][s] (qs: the super-block's 1024 quant bytes).
template <int NR, bool PromptOrder, class PairSums>
inline void q4_Kx8_tile(int64_t nsb, const uint8_t* group, const quant::BlockQ8_K* const a[NR], __m256 out[NR],
                        PairSums pair_sums) {
  __m256 acc[NR], acc_min[NR];
  for (int r = 0; r < NR; ++r) acc[r] = acc_min[r] = _mm256_setzero_ps();
  for (int64_t s = 0; s < nsb; ++s) {
    const uint8_t* super = group + static_cast<size_t>(s) * kQ4_Kx8SuperBytes;
    const auto& h = *reinterpret_cast<const Q4Kx8Header*>(super);
    const uint8_t* qs = super + sizeof(Q4Kx8Header);
    const __m256 dw = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(h.d)));
    const __m256 dmin = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(h.dmin)));
    // Per row, the activation sums of the sub-block pairs: pair_bsums[r][p] holds the int16 sums
    // of sub-blocks 2p and 2p + 1 (bsums added in pairs).
    alignas(16) int32_t pair_bsums[NR][4];
    for (int r = 0; r < NR; ++r) {
      const int16_t* bs = a[r][s].bsums;
      _mm_store_si128(reinterpret_cast<__m128i*>(pair_bsums[r]),
                      _mm_hadd_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(bs)),
                                     _mm_loadu_si128(reinterpret_cast<const __m128i*>(bs + 8))));
    }
    __m256i isum[NR], imin[NR];
    for (int r = 0; r < NR; ++r) isum[r] = imin[r] = _mm256_setzero_si256();
    for (int p = 0; p < 4; ++p) {
      __m256i pair_sum[NR];
      pair_sums.template operator()<NR>(h, qs, p, a, s, pair_sum);
      // Lane i: (min of sub-block 2p, min of 2p + 1) of row i, as int16.
      const __m256i mins = _mm256_cvtepu8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(h.mins[p])));
      for (int r = 0; r < NR; ++r) {
        const __m256i pair_min = _mm256_madd_epi16(mins, _mm256_set1_epi32(pair_bsums[r][p]));
        if constexpr (PromptOrder) {
          const __m256 dy = _mm256_set1_ps(a[r][s].d);
          acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(pair_sum[r]), _mm256_mul_ps(dw, dy), acc[r]);
          acc_min[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(pair_min), _mm256_mul_ps(dmin, dy), acc_min[r]);
        } else {
          isum[r] = _mm256_add_epi32(isum[r], pair_sum[r]);
          imin[r] = _mm256_add_epi32(imin[r], pair_min);
        }
      }
    }
    if constexpr (!PromptOrder) {
      for (int r = 0; r < NR; ++r) {
        const __m256 dy = _mm256_set1_ps(a[r][s].d);
        acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum[r]), _mm256_mul_ps(dw, dy), acc[r]);
        acc_min[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(imin[r]), _mm256_mul_ps(dmin, dy), acc_min[r]);
      }
    }
  }
  for (int r = 0; r < NR; ++r) out[r] = _mm256_sub_ps(acc[r], acc_min[r]);
}

// gemm_q4_Kx8's contract over a whole tile, with the integer step pair_sums (q4_Kx8_tile): the
// first Tile::n_gemm_act activation rows in the prompt order, the others in the one-token order.
template <class PairSums>
inline void q4_Kx8_gemm(const Tile& t, PairSums pair_sums) {
  const int64_t nsb = t.k / 256;
  auto rows = [&]<int NR, bool PromptOrder>(int64_t r0) {
    const quant::BlockQ8_K* a[NR];
    for (int r = 0; r < NR; ++r)
      a[r] = reinterpret_cast<const quant::BlockQ8_K*>(t.act + static_cast<size_t>(r0 + r) * t.act_stride);
    for (int64_t g = 0; g < t.n_rows / 8; ++g) {
      const char* group = t.w + static_cast<size_t>(g) * t.w_stride;
      __m256 out[NR];
      q4_Kx8_tile<NR, PromptOrder>(nsb, reinterpret_cast<const uint8_t*>(group), a, out, pair_sums);
      for (int r = 0; r < NR; ++r) store_rows8(t, r0 + r, 8 * g, out[r]);
    }
  };
  const int64_t n_prompt = t.n_gemm_act < t.n_act ? t.n_gemm_act : t.n_act;
  for_act_groups(n_prompt, [&]<int NR>(int64_t r0) { rows.template operator()<NR, true>(r0); });
  for_act_groups(t.n_act - n_prompt,
                 [&]<int NR>(int64_t r0) { rows.template operator()<NR, false>(n_prompt + r0); });
}

}  // namespace
}  // namespace kiln::gemm
