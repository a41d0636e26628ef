// AVX2 kernel of the Q4_Kx8 layout (layouts.h), bit-identical to gemm_q4_Kx8: lane i of a vector
// holds weight row i's integer sums of a pair of sub-blocks, exactly as the scalar kernel's, and
// takes the same FMAs (per pair for the prompt rows, per super-block for the others). Weight
// nibbles are unpacked once per sub-block for up to four activation rows. Compiled for AVX2 + FMA + F16C;
// uses no inline function of a shared header.
#include <immintrin.h>

#include <cstdint>

#include "ops/gemm/avx2_util.h"
#include "ops/gemm/layouts.h"

namespace kiln::gemm {
namespace {

// Eight rows' 6-bit scales of one sub-block (bytes), each in both 16-bit halves of its lane.
inline __m256i scale_pairs(const uint8_t scales[8]) {
  const __m256i sc = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(scales)));
  return _mm256_or_si256(sc, _mm256_slli_epi32(sc, 16));
}

// Outputs of activation rows a[0 .. NR-1] x the group's eight weight rows. PromptOrder: one FMA
// per pair of sub-blocks (64 values) and row, else one per super-block (layouts.h).
template <int NR, bool PromptOrder>
inline void q4_Kx8_tile(int64_t nsb, const Q4Kx8Header* headers, const uint8_t* q,
                        const quant::BlockQ8_K* const a[NR], __m256 out[NR]) {
  const __m256i low4 = _mm256_set1_epi8(0x0F);
  __m256 acc[NR], acc_min[NR];
  for (int r = 0; r < NR; ++r) acc[r] = acc_min[r] = _mm256_setzero_ps();
  for (int64_t s = 0; s < nsb; ++s) {
    const Q4Kx8Header& h = headers[s];
    const uint8_t* qs = q + 1024 * s;
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
      // Sub-blocks 2p (low nibbles of the pair's bytes) and 2p + 1 (high nibbles): each weight
      // vector is unpacked once per sub-block and meets the NR activation rows in turn.
      __m256i pair_sum[NR];
      for (int half = 0; half < 2; ++half) {
        const int j = 2 * p + half;
        // Each int16 lane sums eight pair sums of at most 2 * 15 * 127: <= 30480, no overflow.
        // Fully unrolled, so that the sums stay in registers.
        __m256i s16[NR];
#pragma GCC unroll 8
        for (int m = 0; m < 8; ++m) {
          const __m256i raw = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(qs + 256 * p + 32 * m));
          const __m256i w = _mm256_and_si256(half ? _mm256_srli_epi16(raw, 4) : raw, low4);
#pragma GCC unroll 4
          for (int r = 0; r < NR; ++r) {
            const __m256i prod = _mm256_maddubs_epi16(w, broadcast4(a[r][s].qs + 32 * j + 4 * m));
            s16[r] = m == 0 ? prod : _mm256_add_epi16(s16[r], prod);
          }
        }
        // Lane i: row i's scale in both 16-bit halves (a madd then gives scale * (lo + hi)).
        const __m256i sc = scale_pairs(h.scales[j]);
        for (int r = 0; r < NR; ++r) {
          const __m256i scaled = _mm256_madd_epi16(s16[r], sc);
          pair_sum[r] = half == 0 ? scaled : _mm256_add_epi32(pair_sum[r], scaled);
        }
      }
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

template <int NR, bool PromptOrder>
void q4_Kx8_rows(const Tile& t, int64_t r0) {
  const int64_t nsb = t.k / 256;
  const quant::BlockQ8_K* a[NR];
  for (int r = 0; r < NR; ++r)
    a[r] = reinterpret_cast<const quant::BlockQ8_K*>(t.act + static_cast<size_t>(r0 + r) * t.act_stride);
  for (int64_t g = 0; g < t.n_rows / 8; ++g) {
    const char* group = t.w + static_cast<size_t>(g) * t.w_stride;
    __m256 out[NR];
    q4_Kx8_tile<NR, PromptOrder>(
        nsb, reinterpret_cast<const Q4Kx8Header*>(group),
        reinterpret_cast<const uint8_t*>(group) + static_cast<size_t>(nsb) * sizeof(Q4Kx8Header), a, out);
    for (int r = 0; r < NR; ++r) store_rows8(t, r0 + r, 8 * g, out[r]);
  }
}

}  // namespace

void gemm_q4_Kx8_avx2(const Tile& t) {
  const int64_t n_prompt = t.n_gemm_act < t.n_act ? t.n_gemm_act : t.n_act;
  for_act_groups(n_prompt, [&]<int NR>(int64_t r0) { q4_Kx8_rows<NR, true>(t, r0); });
  for_act_groups(t.n_act - n_prompt, [&]<int NR>(int64_t r0) { q4_Kx8_rows<NR, false>(t, n_prompt + r0); });
}

}  // namespace kiln::gemm
