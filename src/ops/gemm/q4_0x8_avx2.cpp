// AVX2 kernel of the Q4_0x8 layout (layouts.h), bit-identical to gemm_q4_0x8 (q4_0x8_tile.h): the
// nibbles unpacked to bytes, their products with the activations summed in 16 bits by vpmaddubsw
// (exact: eight pair sums of at most 2 * 15 * 127), widened by one vpmaddwd. Compiled for AVX2 +
// FMA + F16C (CMake's *_avx2.cpp rule).
#include <immintrin.h>

#include "ops/gemm/q4_0x8_tile.h"

namespace kiln::gemm {
namespace {

struct Avx2 {
  // w[m]: elements 4m.. of each row (low nibbles); w[4 + m]: elements 16 + 4m.. (high nibbles).
  static void unpack(const __m256i raw[4], __m256i w[8]) {
    const __m256i low4 = _mm256_set1_epi8(0x0F);
    for (int m = 0; m < 4; ++m) {
      w[m] = _mm256_and_si256(raw[m], low4);
      w[4 + m] = _mm256_and_si256(_mm256_srli_epi16(raw[m], 4), low4);
    }
  }
  static __m256i row_sum(const __m256i w[8], const ActQ8_0& ab) {
    __m256i s16 = _mm256_maddubs_epi16(w[0], broadcast4(ab.qs));
    for (int m = 1; m < 8; ++m) s16 = _mm256_add_epi16(s16, _mm256_maddubs_epi16(w[m], broadcast4(ab.qs + 4 * m)));
    return _mm256_sub_epi32(_mm256_madd_epi16(s16, _mm256_set1_epi16(1)), _mm256_set1_epi32(ab.sum8));
  }
};

}  // namespace

void gemm_q4_0x8_avx2(const Tile& t) { q4_0x8_gemm<Avx2>(t); }

}  // namespace kiln::gemm
