// AVX-512 kernel of the Q4_Kx8 layout (layouts.h), bit-identical to gemm_q4_Kx8 and its AVX2
// kernel: the integer step of q4_Kx8_tile.h by VNNI dot products of four bytes (vpdpbusd on 256-bit
// vectors, AVX512VL), which sum into 32 bits at once, with the scales applied by one multiply per
// sub-block. High nibbles are masked in place (16 times the level) and their sums shifted back
// down, exact since every product is a multiple of 16. Compiled for AVX-512 (CMake's *_avx512.cpp
// rule); call only when quant::cpu_has_avx512_vnni().
#include <immintrin.h>

#include <cstdint>

#include "ops/gemm/q4_kx8_tile.h"

namespace kiln::gemm {
namespace {

template <int NR>
inline void pair_sums_vnni(const Q4Kx8Header& h, const uint8_t* qs, int p, const quant::BlockQ8_K* const a[NR],
                           int64_t s, __m256i pair_sum[NR]) {
  const __m256i low4 = _mm256_set1_epi8(0x0F), high4 = _mm256_set1_epi8(static_cast<char>(0xF0));
  // Two chains per sub-block and row (even and odd m). A lane of `hi` sums at most 32 products of
  // 240 * 128: far inside 32 bits.
  __m256i lo[NR][2], hi[NR][2];
  for (int r = 0; r < NR; ++r) lo[r][0] = lo[r][1] = hi[r][0] = hi[r][1] = _mm256_setzero_si256();
#pragma GCC unroll 8
  for (int m = 0; m < 8; ++m) {
    const __m256i raw = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(qs + 256 * p + 32 * m));
    const __m256i wl = _mm256_and_si256(raw, low4);   // sub-block 2p: levels
    const __m256i wh = _mm256_and_si256(raw, high4);  // sub-block 2p + 1: 16 * levels
#pragma GCC unroll 4
    for (int r = 0; r < NR; ++r) {
      const int8_t* y = a[r][s].qs + 64 * p + 4 * m;
      lo[r][m & 1] = _mm256_dpbusd_epi32(lo[r][m & 1], wl, broadcast4(y));
      hi[r][m & 1] = _mm256_dpbusd_epi32(hi[r][m & 1], wh, broadcast4(y + 32));
    }
  }
  const __m256i sc_lo = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(h.scales[2 * p])));
  const __m256i sc_hi =
      _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(h.scales[2 * p + 1])));
  for (int r = 0; r < NR; ++r) {
    const __m256i sum_lo = _mm256_add_epi32(lo[r][0], lo[r][1]);
    const __m256i sum_hi = _mm256_srai_epi32(_mm256_add_epi32(hi[r][0], hi[r][1]), 4);
    pair_sum[r] = _mm256_add_epi32(_mm256_mullo_epi32(sum_lo, sc_lo), _mm256_mullo_epi32(sum_hi, sc_hi));
  }
}

}  // namespace

void gemm_q4_Kx8_avx512(const Tile& t) {
  q4_Kx8_gemm(t, []<int NR>(const Q4Kx8Header& h, const uint8_t* qs, int p, const quant::BlockQ8_K* const a[NR],
                           int64_t s, __m256i out[NR]) { pair_sums_vnni<NR>(h, qs, p, a, s, out); });
}

}  // namespace kiln::gemm
