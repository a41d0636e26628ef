// AVX2 kernel of the Q8_0x8 layout (layouts.h), bit-identical to gemm_q8_0x8 (q8_0x8_row.h): the
// products summed in pairs by vpmaddubsw (no saturation: |a| <= 127 and w != -128), then in fours
// by vpmaddwd. Compiled for AVX2 + FMA + F16C (CMake's *_avx2.cpp rule).
#include <immintrin.h>

#include "ops/gemm/q8_0x8_row.h"

namespace kiln::gemm {

void gemm_q8_0x8_avx2(const Tile& t) {
  const __m256i ones16 = _mm256_set1_epi16(1);
  q8_0x8_gemm(t, [&](__m256i abs_y, __m256i signed_w) {
    return _mm256_madd_epi16(_mm256_maddubs_epi16(abs_y, signed_w), ones16);
  });
}

}  // namespace kiln::gemm
