// AVX2 kernel of the Q4_Kx8 layout (layouts.h), bit-identical to gemm_q4_Kx8: the integer step of
// q4_Kx8_tile.h by vpmaddubsw sums in 16 bits, with the scales applied by one vpmaddwd per
// sub-block. Weight nibbles are unpacked once per sub-block for up to four activation rows.
// Compiled for AVX2 + FMA + F16C.
#include <immintrin.h>

#include <cstdint>

#include "ops/gemm/q4_kx8_tile.h"

namespace kiln::gemm {
namespace {

// Eight rows' 6-bit scales of one sub-block (bytes), each in both 16-bit halves of its lane.
inline __m256i scale_pairs(const uint8_t scales[8]) {
  const __m256i sc = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(scales)));
  return _mm256_or_si256(sc, _mm256_slli_epi32(sc, 16));
}

template <int NR>
inline void pair_sums_avx2(const Q4Kx8Header& h, const uint8_t* qs, int p, const quant::BlockQ8_K* const a[NR],
                           int64_t s, __m256i pair_sum[NR]) {
  const __m256i low4 = _mm256_set1_epi8(0x0F);
  // Sub-blocks 2p (low nibbles of the pair's bytes) and 2p + 1 (high nibbles): each weight vector
  // is unpacked once per sub-block and meets the NR activation rows in turn.
  for (int half = 0; half < 2; ++half) {
    const int j = 2 * p + half;
    // Each int16 lane sums eight pair sums of at most 2 * 15 * 127: <= 30480, no overflow. Fully
    // unrolled, so that the sums stay in registers.
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
}

}  // namespace

void gemm_q4_Kx8_avx2(const Tile& t) {
  q4_Kx8_gemm(t, []<int NR>(const Q4Kx8Header& h, const uint8_t* qs, int p, const quant::BlockQ8_K* const a[NR],
                           int64_t s, __m256i out[NR]) { pair_sums_avx2<NR>(h, qs, p, a, s, out); });
}

}  // namespace kiln::gemm
