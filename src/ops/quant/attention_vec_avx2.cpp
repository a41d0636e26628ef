// AVX2 + F16C bodies of attention_vec.h.
#include <immintrin.h>

#include <cmath>
#include <cstddef>
#include <cstdint>

#include "core/dtype.h"

namespace kiln::quant {
namespace {

// Eight values of x (F32 or F16) from index i, as floats.
inline __m256 load8(const void* x, DType type, int64_t i) {
  if (type == DType::F16)
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(static_cast<const uint16_t*>(x) + i)));
  return _mm256_loadu_ps(static_cast<const float*>(x) + i);
}

// In place: r[j] lane e -> r[e] lane j (an 8x8 transpose).
inline void transpose8(__m256 r[8]) {
  __m256 t[8], u[8];
  for (int k = 0; k < 4; ++k) {
    t[2 * k] = _mm256_unpacklo_ps(r[2 * k], r[2 * k + 1]);
    t[2 * k + 1] = _mm256_unpackhi_ps(r[2 * k], r[2 * k + 1]);
  }
  for (int k = 0; k < 2; ++k) {
    u[4 * k + 0] = _mm256_shuffle_ps(t[4 * k], t[4 * k + 2], _MM_SHUFFLE(1, 0, 1, 0));
    u[4 * k + 1] = _mm256_shuffle_ps(t[4 * k], t[4 * k + 2], _MM_SHUFFLE(3, 2, 3, 2));
    u[4 * k + 2] = _mm256_shuffle_ps(t[4 * k + 1], t[4 * k + 3], _MM_SHUFFLE(1, 0, 1, 0));
    u[4 * k + 3] = _mm256_shuffle_ps(t[4 * k + 1], t[4 * k + 3], _MM_SHUFFLE(3, 2, 3, 2));
  }
  for (int k = 0; k < 4; ++k) {
    r[k] = _mm256_permute2f128_ps(u[k], u[k + 4], 0x20);
    r[k + 4] = _mm256_permute2f128_ps(u[k], u[k + 4], 0x31);
  }
}

}  // namespace

void f16_mad_avx2(int64_t n, uint16_t* y, const uint16_t* x, float v) {
  const __m256 vv = _mm256_set1_ps(v);
  for (int64_t i = 0; i < n; i += 8) {
    const __m256 ys = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(y + i)));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(y + i),
                     _mm256_cvtps_ph(_mm256_fmadd_ps(load8(x, DType::F16, i), vv, ys), _MM_FROUND_TO_NEAREST_INT));
  }
}

void f16_scale_avx2(int64_t n, uint16_t* y, float s) {
  const __m256 vs = _mm256_set1_ps(s);
  for (int64_t i = 0; i < n; i += 8) {
    const __m256 ys = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(y + i)));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(y + i), _mm256_cvtps_ph(_mm256_mul_ps(ys, vs), _MM_FROUND_TO_NEAREST_INT));
  }
}

namespace {

// y[i0 .. i0 + 8 NV) over all rows, held in NV registers.
template <int NV>
void mad_rows_chunk(int64_t n_rows, int64_t i0, float* y, const char* rows, size_t row_bytes, DType x_type,
                    const float* v) {
  __m256 acc[NV];
  for (int c = 0; c < NV; ++c) acc[c] = _mm256_loadu_ps(y + i0 + 8 * c);
  for (int64_t j = 0; j < n_rows; ++j) {
    if (v[j] == 0.0f) continue;
    const char* x = rows + static_cast<size_t>(j) * row_bytes;
    const __m256 vv = _mm256_set1_ps(v[j]);
    for (int c = 0; c < NV; ++c) acc[c] = _mm256_fmadd_ps(load8(x, x_type, i0 + 8 * c), vv, acc[c]);
  }
  for (int c = 0; c < NV; ++c) _mm256_storeu_ps(y + i0 + 8 * c, acc[c]);
}

}  // namespace

void f32_mad_rows_avx2(int64_t n_rows, int64_t n, float* y, const char* rows, size_t row_bytes, DType x_type,
                       const float* v) {
  int64_t i0 = 0;
  for (; i0 + 64 <= n; i0 += 64) mad_rows_chunk<8>(n_rows, i0, y, rows, row_bytes, x_type, v);
  for (; i0 < n; i0 += 8) mad_rows_chunk<1>(n_rows, i0, y, rows, row_bytes, x_type, v);
}

void dot_rows8_sequential_avx2(int64_t dk, const char* rows, size_t row_bytes, DType type, const float* q, float* out) {
  // Lane j of dot is row j's chain; each step e is one FMA per lane, in order of e.
  __m256 dot = _mm256_setzero_ps();
  for (int64_t e0 = 0; e0 < dk; e0 += 8) {
    __m256 k[8];  // k[j] = row j's values e0..e0+7, then transposed: k[e] = value e0+e of rows 0..7
    for (int j = 0; j < 8; ++j) k[j] = load8(rows + j * row_bytes, type, e0);
    transpose8(k);
    for (int e = 0; e < 8; ++e) dot = _mm256_fmadd_ps(k[e], _mm256_set1_ps(q[e0 + e]), dot);
  }
  _mm256_storeu_ps(out, dot);
}

void exp_shifted_ggml_avx2(int64_t n, float* w, float max) {
  // expf_ggml_avx512's steps, eight lanes at a time. Its ldexp(j, n) (|n| <= 192) is two exact-
  // then-rounded multiplies: j * 2^(n >> 1) stays a normal float (no rounding), and the product
  // with 2^(n - (n >> 1)) rounds once, as ldexp does.
  const __m256 vmax = _mm256_set1_ps(max), r = _mm256_set1_ps(0x1.8p23f);
  const __m256 big = _mm256_set1_ps(192.0f), inf = _mm256_set1_ps(INFINITY), zero = _mm256_setzero_ps();
  const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
  const __m256i bias = _mm256_set1_epi32(127);
  for (int64_t i = 0; i < n; i += 8) {
    const __m256 x = _mm256_sub_ps(_mm256_loadu_ps(w + i), vmax);
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
    e = _mm256_blendv_ps(e, nf, _mm256_cmp_ps(nf, nf, _CMP_UNORD_Q));
    _mm256_storeu_ps(w + i, e);
  }
}

}  // namespace kiln::quant
