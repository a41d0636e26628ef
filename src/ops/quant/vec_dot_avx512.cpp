// Variants for CPUs with AVX-512 VNNI (and VL: the 256-bit forms of its dot products); callers
// check cpu_has_avx512_vnni().
#include <immintrin.h>

#include <cstdint>

#include "ops/quant/kernels.h"
#include "ops/quant/q4_0_lanes_avx2.h"
#include "ops/quant/vec_dots_simd.h"

namespace kiln::quant {

void vec_dot_q4_0_q8_0_rows8_8x4_avx512(int64_t n, float* s, size_t s_stride, const BlockQ4_0* x, size_t x_stride,
                                        const BlockQ8_0* y, size_t y_stride) {
  // sum(q * y) by VNNI dot products of four bytes (two chains), minus 8 * sum(y).
  const __m256i ones8 = _mm256_set1_epi8(1);
  q4_0_q8_0_rows8_8x4(n, s, s_stride, x, x_stride, y, y_stride, [&](const __m256i w[8], const int8_t* qy) {
    __m256i dot0 = _mm256_setzero_si256(), dot1 = _mm256_setzero_si256();
    for (int k = 0; k < 8; k += 2) {
      dot0 = _mm256_dpbusd_epi32(dot0, w[k], broadcast_y4(qy, k));
      dot1 = _mm256_dpbusd_epi32(dot1, w[k + 1], broadcast_y4(qy, k + 1));
    }
    const __m256i ysum = broadcast_sum_i32x8(
        _mm256_dpbusd_epi32(_mm256_setzero_si256(), ones8, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(qy))));
    return _mm256_sub_epi32(_mm256_add_epi32(dot0, dot1), _mm256_slli_epi32(ysum, 3));
  });
}

// Q4_1, Q5_0, Q5_1, IQ4_NL, IQ4_XS, Q2_K .. Q6_K: vec_dots_simd.h's kernels with the VNNI integer
// steps (int_steps_simd.h), the AVX2 kernels' bits.
KILN_DEFINE_INT_VEC_DOTS(avx512)

}  // namespace kiln::quant
