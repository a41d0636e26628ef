// AVX2 + F16C bodies of f16_vec.h, for n a multiple of 8.
#include <immintrin.h>

#include <cstdint>

namespace kiln::quant {

void f16_mad_avx2(int64_t n, uint16_t* y, const uint16_t* x, float v) {
  const __m256 vv = _mm256_set1_ps(v);
  for (int64_t i = 0; i < n; i += 8) {
    const __m256 xs = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x + i)));
    const __m256 ys = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(y + i)));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(y + i),
                     _mm256_cvtps_ph(_mm256_fmadd_ps(xs, vv, ys), _MM_FROUND_TO_NEAREST_INT));
  }
}

void f16_scale_avx2(int64_t n, uint16_t* y, float s) {
  const __m256 vs = _mm256_set1_ps(s);
  for (int64_t i = 0; i < n; i += 8) {
    const __m256 ys = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(y + i)));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(y + i), _mm256_cvtps_ph(_mm256_mul_ps(ys, vs), _MM_FROUND_TO_NEAREST_INT));
  }
}

}  // namespace kiln::quant
