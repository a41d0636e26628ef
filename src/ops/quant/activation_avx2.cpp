// AVX2 activation quantizers: ggml's x86 quantize_row_q8_0 / quantize_row_q8_1 (ref:
// ggml-cpu/arch/x86/quants.c, __AVX2__ path). Same results as quantize_row_q8_0_x86 /
// quantize_row_q8_1_x86 (activation.cpp), which tests/quant checks.
//
// The pragma enables the ISA even when the build passes no *_avx2.cpp flags (see vec_dot_avx2.cpp).
#pragma GCC target("avx2,fma,f16c")
#include <immintrin.h>

#include "ops/quant/kernels.h"

namespace kiln::quant {
namespace {

// One block of 32: levels into qs; returns the F32 delta amax/127 and the sum of the levels.
inline float quantize_block_avx2(const float* x, int8_t* qs, int* sum) {
  __m256 v0 = _mm256_loadu_ps(x);
  __m256 v1 = _mm256_loadu_ps(x + 8);
  __m256 v2 = _mm256_loadu_ps(x + 16);
  __m256 v3 = _mm256_loadu_ps(x + 24);
  const __m256 sign_bit = _mm256_set1_ps(-0.0f);
  __m256 max_abs = _mm256_andnot_ps(sign_bit, v0);
  max_abs = _mm256_max_ps(max_abs, _mm256_andnot_ps(sign_bit, v1));
  max_abs = _mm256_max_ps(max_abs, _mm256_andnot_ps(sign_bit, v2));
  max_abs = _mm256_max_ps(max_abs, _mm256_andnot_ps(sign_bit, v3));
  __m128 max4 = _mm_max_ps(_mm256_extractf128_ps(max_abs, 1), _mm256_castps256_ps128(max_abs));
  max4 = _mm_max_ps(max4, _mm_movehl_ps(max4, max4));
  max4 = _mm_max_ss(max4, _mm_movehdup_ps(max4));
  const float amax = _mm_cvtss_f32(max4);
  const float d = amax / 127.f;
  const float id = (amax != 0.0f) ? 127.f / amax : 0.0f;
  const __m256 mul = _mm256_set1_ps(id);
  v0 = _mm256_round_ps(_mm256_mul_ps(v0, mul), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  v1 = _mm256_round_ps(_mm256_mul_ps(v1, mul), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  v2 = _mm256_round_ps(_mm256_mul_ps(v2, mul), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  v3 = _mm256_round_ps(_mm256_mul_ps(v3, mul), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256i i0 = _mm256_cvtps_epi32(v0);
  __m256i i1 = _mm256_cvtps_epi32(v1);
  __m256i i2 = _mm256_cvtps_epi32(v2);
  __m256i i3 = _mm256_cvtps_epi32(v3);
  // The sum is taken over the stored (saturated) levels; ggml sums the int32 values before packing,
  // which differs only when a product is infinite or NaN (a subnormal or NaN block maximum).
  i0 = _mm256_packs_epi32(i0, i1);  // int16, lanes interleaved per 128-bit half
  i2 = _mm256_packs_epi32(i2, i3);
  i0 = _mm256_packs_epi16(i0, i2);  // int8
  i0 = _mm256_permutevar8x32_epi32(i0, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(qs), i0);
  const __m256i s16 = _mm256_maddubs_epi16(_mm256_set1_epi8(1), i0);
  const __m256i s32 = _mm256_madd_epi16(s16, _mm256_set1_epi16(1));
  __m128i s4 = _mm_add_epi32(_mm256_castsi256_si128(s32), _mm256_extracti128_si256(s32, 1));
  s4 = _mm_add_epi32(s4, _mm_srli_si128(s4, 8));
  s4 = _mm_add_epi32(s4, _mm_srli_si128(s4, 4));
  *sum = _mm_cvtsi128_si32(s4);
  return d;
}

}  // namespace

void quantize_row_q8_0_x86_avx2(const float* x, BlockQ8_0* y, int64_t n) {
  for (int64_t i = 0; i < n / kQK8_0; ++i) {
    int sum;
    const float d = quantize_block_avx2(x + i * kQK8_0, y[i].qs, &sum);
    y[i].d = static_cast<uint16_t>(_cvtss_sh(d, 0));
  }
}

void quantize_row_q8_1_x86_avx2(const float* x, BlockQ8_1* y, int64_t n) {
  for (int64_t i = 0; i < n / kQK8_1; ++i) {
    int sum;
    const float d = quantize_block_avx2(x + i * kQK8_1, y[i].qs, &sum);
    y[i].d = static_cast<uint16_t>(_cvtss_sh(d, 0));
    y[i].s = static_cast<uint16_t>(_cvtss_sh(d * static_cast<float>(sum), 0));
  }
}

}  // namespace kiln::quant
