// AVX2 + F16C body of f16_lookup.h: eight values rounded to F16 at once, looked up one by one,
// widened back at once.
#include <immintrin.h>

#include "ops/quant/f16_lookup.h"

namespace kiln::quant {

void f16_lookup_avx2(int64_t n, float* y, const float* x, const uint16_t* table) {
  alignas(16) uint16_t h[8];
  for (int64_t i = 0; i < n; i += 8) {
    _mm_store_si128(reinterpret_cast<__m128i*>(h),
                    _mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT));
    for (uint16_t& v : h) v = table[v];
    _mm256_storeu_ps(y + i, _mm256_cvtph_ps(_mm_load_si128(reinterpret_cast<const __m128i*>(h))));
  }
}

}  // namespace kiln::quant
