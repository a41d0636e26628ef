#include "ops/quant/attention_vec.h"

#include <cmath>

#include "core/half.h"
#include "ops/quant/kernels.h"
#include "ops/quant/simd_math.h"

namespace kiln::quant {

// attention_vec_avx2.cpp: n a multiple of 8 (rows: of 8 rows, dk of 8 values).
void f16_mad_avx2(int64_t n, uint16_t* y, const uint16_t* x, float v);
void f16_scale_avx2(int64_t n, uint16_t* y, float s);
void f32_mad_rows_avx2(int nq, int64_t n_rows, int64_t n, float* const* y, const char* rows, size_t row_bytes,
                       DType x_type, const float* const* v);
void dot_rows8_sequential_avx2(int nq, int64_t dk, const char* rows, size_t row_bytes, DType type,
                               const float* const* q, float* const* out, int64_t at);
void exp_shifted_ggml_avx2(int64_t n, float* w, float max);

namespace {

float load(DType type, const void* p, int64_t i) {
  return type == DType::F16 ? f16_to_f32(static_cast<const uint16_t*>(p)[i]) : static_cast<const float*>(p)[i];
}

}  // namespace

void f16_mad(int64_t n, uint16_t* y, const uint16_t* x, float v) {
  int64_t i = 0;
  if (cpu_has_avx2()) {
    i = n / 8 * 8;
    f16_mad_avx2(i, y, x, v);
  }
  for (; i < n; ++i) y[i] = f32_to_f16(std::fma(f16_to_f32(x[i]), v, f16_to_f32(y[i])));
}

void f16_scale(int64_t n, uint16_t* y, float s) {
  int64_t i = 0;
  if (cpu_has_avx2()) {
    i = n / 8 * 8;
    f16_scale_avx2(i, y, s);
  }
  for (; i < n; ++i) y[i] = f32_to_f16(f16_to_f32(y[i]) * s);
}

void f32_mad_rows(int nq, int64_t n_rows, int64_t n, float* const* y, const char* rows, size_t row_bytes,
                  DType x_type, const float* const* v) {
  int64_t i0 = 0;
  if (cpu_has_avx2()) {
    i0 = n / 8 * 8;
    f32_mad_rows_avx2(nq, n_rows, i0, y, rows, row_bytes, x_type, v);
  }
  for (int qi = 0; qi < nq; ++qi) {
    for (int64_t j = 0; j < n_rows; ++j) {
      if (v[qi][j] == 0.0f) continue;
      const char* x = rows + static_cast<size_t>(j) * row_bytes;
      for (int64_t i = i0; i < n; ++i) y[qi][i] = std::fma(load(x_type, x, i), v[qi][j], y[qi][i]);
    }
  }
}

void dot_rows_sequential(int nq, int64_t n_rows, int64_t dk, const char* rows, size_t row_bytes, DType type,
                         const float* const* q, float* const* out) {
  int64_t j = 0;
  if (cpu_has_avx2() && dk % 8 == 0) {
    for (; j + 8 <= n_rows; j += 8) dot_rows8_sequential_avx2(nq, dk, rows + j * row_bytes, row_bytes, type, q, out, j);
  }
  for (; j < n_rows; ++j) {
    const char* row = rows + j * row_bytes;
    for (int qi = 0; qi < nq; ++qi) {
      float dot = 0.0f;
      for (int64_t e = 0; e < dk; ++e) dot = std::fma(load(type, row, e), q[qi][e], dot);
      out[qi][j] = dot;
    }
  }
}

void exp_shifted_ggml(int64_t n, float* w, float max) {
  int64_t i = 0;
  if (cpu_has_avx2()) {
    i = n / 8 * 8;
    exp_shifted_ggml_avx2(i, w, max);
  }
  for (; i < n; ++i) w[i] = expf_ggml_avx512(w[i] - max);
}

}  // namespace kiln::quant
