// AVX2 + F16C bodies of attention_vec.h.
#include <immintrin.h>

#include <cmath>
#include <cstddef>
#include <cstdint>

#include "core/dtype.h"
#include "ops/quant/simd_math_avx2.h"

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
  const __m256 vmax = _mm256_set1_ps(max);
  for (int64_t i = 0; i < n; i += 8)
    _mm256_storeu_ps(w + i, expf_ggml_avx512_x8(_mm256_sub_ps(_mm256_loadu_ps(w + i), vmax)));
}

}  // namespace kiln::quant
