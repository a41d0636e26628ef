// AVX2 + F16C row conversions between F32 and F16 (rounding to nearest even, as core/half.h's
// f32_to_f16, which equals vcvtps2ph): the F16 type's to_float / from_float on such CPUs.
// Tails through core/half.h's out-of-line row helpers (no inline function of a shared header).
#include <immintrin.h>

#include "core/half.h"
#include "ops/quant/kernels.h"

namespace kiln::quant {

void f32_to_f16_row_avx2(const float* x, uint16_t* y, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(y + i),
                     _mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT));
  }
  f32_to_f16_row(x + i, y + i, n - i);
}

void f16_to_f32_row_avx2(const uint16_t* x, float* y, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(y + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x + i))));
  f16_to_f32_row(x + i, y + i, n - i);
}

}  // namespace kiln::quant
