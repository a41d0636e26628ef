// AVX2 bodies of silu_rows.h.
#include <immintrin.h>

#include "ops/quant/silu_rows.h"
#include "ops/quant/simd_math_avx2.h"

namespace kiln::quant {

void silu_ggml_avx2(int64_t n, float* y, const float* x) {
  for (int64_t i = 0; i < n; i += 8) _mm256_storeu_ps(y + i, silu_ggml_avx512_x8(_mm256_loadu_ps(x + i)));
}

void swiglu_ggml_avx2(int64_t n, float* y, const float* x, const float* g) {
  for (int64_t i = 0; i < n; i += 8)
    _mm256_storeu_ps(y + i, _mm256_mul_ps(silu_ggml_avx512_x8(_mm256_loadu_ps(x + i)), _mm256_loadu_ps(g + i)));
}

}  // namespace kiln::quant
