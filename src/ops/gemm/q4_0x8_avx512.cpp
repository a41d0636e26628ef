// AVX-512 kernel of the Q4_0x8 layout (layouts.h), bit-identical to gemm_q4_0x8 and its AVX2 kernel
// (q4_0x8_tile.h): VNNI dot products of four bytes (vpdpbusd on 256-bit vectors, AVX512VL) sum the
// products into 32 bits at once. High nibbles are masked in place (16 times the level) into a chain
// of their own, shifted back down at the end (exact: every product is a multiple of 16). Compiled
// for AVX-512 (CMake's *_avx512.cpp rule); call only when quant::cpu_has_avx512_vnni().
#include <immintrin.h>

#include "ops/gemm/q4_0x8_tile.h"

namespace kiln::gemm {
namespace {

struct Vnni {
  // w[m]: the low nibbles of raw[m] (elements 4m..); w[4 + m]: its high nibbles in place (16 times
  // elements 16 + 4m..).
  static void unpack(const __m256i raw[4], __m256i w[8]) {
    const __m256i low4 = _mm256_set1_epi8(0x0F), high4 = _mm256_set1_epi8(static_cast<char>(0xF0));
    for (int m = 0; m < 4; ++m) {
      w[m] = _mm256_and_si256(raw[m], low4);
      w[4 + m] = _mm256_and_si256(raw[m], high4);
    }
  }
  static __m256i row_sum(const __m256i w[8], const ActQ8_0& ab) {
    // A lane of `hi` sums 16 products of at most 240 * 128: far inside 32 bits.
    __m256i lo = _mm256_setzero_si256(), hi = _mm256_setzero_si256();
    for (int m = 0; m < 4; ++m) {
      lo = _mm256_dpbusd_epi32(lo, w[m], broadcast4(ab.qs + 4 * m));
      hi = _mm256_dpbusd_epi32(hi, w[4 + m], broadcast4(ab.qs + 16 + 4 * m));
    }
    return _mm256_sub_epi32(_mm256_add_epi32(lo, _mm256_srai_epi32(hi, 4)), _mm256_set1_epi32(ab.sum8));
  }
};

}  // namespace

void gemm_q4_0x8_avx512(const Tile& t) { q4_0x8_gemm<Vnni>(t); }

}  // namespace kiln::gemm
