// Eight-lane AVX2 forms of simd_math.h's element-by-element functions, bit for bit the same.
// Include only from *_avx2.cpp files (compiled with -mavx2 -mfma).
#pragma once

#include <immintrin.h>

#include <cmath>

namespace kiln::quant {

// expf_ggml_avx512 on eight lanes. Its ldexp(j, n) (|n| <= 192) is two exact-then-rounded
// multiplies: j * 2^(n >> 1) stays a normal float (no rounding), and the product with
// 2^(n - (n >> 1)) rounds once, as ldexp does. |n| > 192 gives 0 or infinity, NaN stays NaN.
inline __m256 expf_ggml_avx512_x8(__m256 x) {
  const __m256 r = _mm256_set1_ps(0x1.8p23f);
  const __m256 big = _mm256_set1_ps(192.0f), inf = _mm256_set1_ps(INFINITY), zero = _mm256_setzero_ps();
  const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
  const __m256i bias = _mm256_set1_epi32(127);
  const __m256 z = _mm256_fmadd_ps(x, _mm256_set1_ps(0x1.715476p+0f), r);
  const __m256 nf = _mm256_sub_ps(z, r);
  const __m256 b = _mm256_fnmadd_ps(nf, _mm256_set1_ps(0x1.7f7d1cp-20f),
                                    _mm256_fnmadd_ps(nf, _mm256_set1_ps(0x1.62e4p-1f), x));
  const __m256 u = _mm256_mul_ps(b, b);
  const __m256 j = _mm256_fmadd_ps(
      _mm256_fmadd_ps(_mm256_fmadd_ps(_mm256_set1_ps(0x1.0e4020p-7f), b, _mm256_set1_ps(0x1.573e2ep-5f)), u,
                      _mm256_fmadd_ps(_mm256_set1_ps(0x1.555e66p-3f), b, _mm256_set1_ps(0x1.fffdb6p-2f))),
      u, _mm256_fmadd_ps(_mm256_set1_ps(0x1.ffffecp-1f), b, _mm256_set1_ps(1.0f)));
  const __m256i ni = _mm256_cvttps_epi32(nf);  // nf is integral
  const __m256i a = _mm256_srai_epi32(ni, 1);
  const __m256 scale_a = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(a, bias), 23));
  const __m256 scale_b = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(_mm256_sub_epi32(ni, a), bias), 23));
  __m256 e = _mm256_mul_ps(_mm256_mul_ps(j, scale_a), scale_b);
  const __m256 out_of_range = _mm256_cmp_ps(_mm256_and_ps(nf, abs_mask), big, _CMP_GT_OQ);
  e = _mm256_blendv_ps(e, _mm256_blendv_ps(inf, zero, _mm256_cmp_ps(nf, zero, _CMP_LE_OQ)), out_of_range);
  return _mm256_blendv_ps(e, nf, _mm256_cmp_ps(nf, nf, _CMP_UNORD_Q));
}

// silu_ggml_avx512 on eight lanes: x / (1 + e^-x).
inline __m256 silu_ggml_avx512_x8(__m256 x) {
  const __m256 e = expf_ggml_avx512_x8(_mm256_sub_ps(_mm256_setzero_ps(), x));
  return _mm256_div_ps(x, _mm256_add_ps(_mm256_set1_ps(1.0f), e));
}

}  // namespace kiln::quant
