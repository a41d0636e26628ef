// AVX-512 kernel of the Q8_0x8 layout (layouts.h), bit-identical to gemm_q8_0x8 and its AVX2 kernel
// (q8_0x8_row.h): the four products of a lane summed by one VNNI dot product (vpdpbusd on 256-bit
// vectors, AVX512VL) into a zero accumulator. Compiled for AVX-512 (CMake's *_avx512.cpp rule);
// call only when quant::cpu_has_avx512_vnni().
#include <immintrin.h>

#include "ops/gemm/q8_0x8_row.h"

namespace kiln::gemm {

void gemm_q8_0x8_avx512(const Tile& t) {
  q8_0x8_gemm(t, [](__m256i abs_y, __m256i signed_w) {
    return _mm256_dpbusd_epi32(_mm256_setzero_si256(), abs_y, signed_w);
  });
}

}  // namespace kiln::gemm
