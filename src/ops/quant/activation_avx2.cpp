// AVX2 activation quantizers: ggml's x86 quantize_row_q8_0 / quantize_row_q8_1 (ref:
// ggml-cpu/arch/x86/quants.c, __AVX2__ path), and its quantize_row_q8_K, which on x86 is the
// reference quantizer (ggml-quants.c quantize_row_q8_K_ref). Same bytes as quantize_row_q8_0_x86 /
// quantize_row_q8_1_x86 (activation.cpp) and quantize_row_q8_K_ref (kquants.cpp), which
// tests/quant checks.
//
// The pragma enables the ISA even when the build passes no *_avx2.cpp flags (see vec_dot_avx2.cpp).
#pragma GCC target("avx2,fma,f16c")
#include <immintrin.h>

#include <bit>

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

// quantize_row_q8_K_ref with the same float operations: max is the first value of the largest
// magnitude (NaNs never win: MAXPS keeps its second operand, the running maximum, when the first
// is NaN), iscale = -127 / max, each level nearest_int(iscale * x) by the 1.5 * 2^23 trick, capped
// at 127 and stored truncated to 8 bits, bsums the sums of the stored levels by 16, d = 1 / iscale.
// An all-zero (or all-NaN) block stores d = 0 and zero levels and bsums, as the scalar does.
void quantize_row_q8_K_avx2(const float* x, BlockQ8_K* y, int64_t n) {
  const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7FFFFFFF));
  const __m256 bias = _mm256_set1_ps(12582912.f);
  const __m256i mantissa = _mm256_set1_epi32(0x007FFFFF), offset = _mm256_set1_epi32(0x00400000);
  const __m256i cap = _mm256_set1_epi32(127), low_byte = _mm256_set1_epi32(0xFF);
  const __m256i ones8 = _mm256_set1_epi8(1), ones16 = _mm256_set1_epi16(1);
  for (int64_t i = 0; i < n / kQK_K; ++i, x += kQK_K) {
    __m256 vmax = _mm256_setzero_ps();
    for (int j = 0; j < kQK_K; j += 8)
      vmax = _mm256_max_ps(_mm256_and_ps(_mm256_loadu_ps(x + j), abs_mask), vmax);
    __m128 m4 = _mm_max_ps(_mm256_extractf128_ps(vmax, 1), _mm256_castps256_ps128(vmax));
    m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
    m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
    const float amax = _mm_cvtss_f32(m4);
    if (!(amax > 0.0f)) {
      y[i].d = 0;
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(y[i].bsums), _mm256_setzero_si256());
      for (int j = 0; j < kQK_K; j += 32)
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(y[i].qs + j), _mm256_setzero_si256());
      continue;
    }
    float max = 0;
    for (int j = 0; j < kQK_K; j += 8) {
      const __m256 ax = _mm256_and_ps(_mm256_loadu_ps(x + j), abs_mask);
      const int hits = _mm256_movemask_ps(_mm256_cmp_ps(ax, _mm256_set1_ps(amax), _CMP_EQ_OQ));
      if (hits != 0) {
        max = x[j + std::countr_zero(static_cast<unsigned>(hits))];
        break;
      }
    }
    const float iscale = -127.f / max;
    const __m256 scale = _mm256_set1_ps(iscale);
    // Levels of 32 values at a time; partial[c] lane l: sums of stored levels 4l..4l+3 of the
    // 128-bit half's 16 (halves = bsums 2c and 2c + 1).
    __m256i partial[kQK_K / 32];
    for (int c = 0; c < kQK_K / 32; ++c) {
      __m256i q[4];
      for (int v = 0; v < 4; ++v) {
        const __m256 biased = _mm256_add_ps(_mm256_mul_ps(scale, _mm256_loadu_ps(x + 32 * c + 8 * v)), bias);
        const __m256i level =
            _mm256_sub_epi32(_mm256_and_si256(_mm256_castps_si256(biased), mantissa), offset);
        q[v] = _mm256_and_si256(_mm256_min_epi32(level, cap), low_byte);
      }
      // Bytes 0..255 pack without saturation; the pack interleaves 128-bit halves, the permute
      // puts the 32 levels back in order.
      const __m256i bytes = _mm256_permutevar8x32_epi32(
          _mm256_packus_epi16(_mm256_packus_epi32(q[0], q[1]), _mm256_packus_epi32(q[2], q[3])),
          _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(y[i].qs + 32 * c), bytes);
      partial[c] = _mm256_madd_epi16(_mm256_maddubs_epi16(ones8, bytes), ones16);
    }
    // Two rounds of pairwise sums: half h of sum4[0] lane l = bsum 2l + h, of sum4[1] 8 + 2l + h.
    __m256i sum4[2];
    for (int g = 0; g < 2; ++g) {
      const __m256i* p = partial + 4 * g;
      sum4[g] = _mm256_hadd_epi32(_mm256_hadd_epi32(p[0], p[1]), _mm256_hadd_epi32(p[2], p[3]));
    }
    const __m256i packed = _mm256_packs_epi32(sum4[0], sum4[1]);  // |bsum| <= 16 * 128
    const __m128i even = _mm256_castsi256_si128(packed), odd = _mm256_extracti128_si256(packed, 1);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(y[i].bsums), _mm_unpacklo_epi16(even, odd));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(y[i].bsums + 8), _mm_unpackhi_epi16(even, odd));
    y[i].d = 1 / iscale;
  }
}

}  // namespace kiln::quant
