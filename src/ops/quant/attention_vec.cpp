#include "ops/quant/attention_vec.h"

#include <algorithm>
#include <cmath>

#include "core/half.h"
#include "ops/quant/kernels.h"
#include "ops/quant/simd_math.h"
#include "ops/softmax_row.h"

namespace kiln::quant {

// attention_vec_avx2.cpp: n a multiple of 8 (rows: of 8 rows, dk of 8 values; columns: of 8).
void f16_mad_keys_avx2(int64_t n_keys, const F16Key* keys, int64_t n, uint16_t* y, const char* rows,
                       size_t row_bytes);
void f32_mad_rows_avx2(int nq, int64_t n_rows, int64_t n, float* const* y, const char* rows, size_t row_bytes,
                       DType x_type, const float* const* v, bool skip_zero_weights);
void exp_shifted_ggml_avx2(int64_t n, float* w, float max);
void transpose_rows8_f32_avx2(int64_t dk, const char* rows, size_t row_bytes, DType type, float* out,
                              int64_t ld);
void dot_cols_sequential_avx2(int nq, int64_t n, int64_t dk, const float* kt, int64_t ld,
                              const float* const* q, float* const* out);
void dot_cols_vec_dot_f32_avx2(int nq, int64_t n, int64_t dk, const float* kt, int64_t ld,
                               const float* const* q, float* const* out);
void reduce_add_16_rows_avx2(int64_t n, const float* rows, int64_t ld, float* out);
float scale_add_mask_max_avx2(int64_t n, float* w, float scale, const float* mv);
uint64_t visible_bits_avx2(int64_t n, const float* mv);
float reduce_add_16_avx2(const float* v);

namespace {

float load(DType type, const void* p, int64_t i) {
  return type == DType::F16 ? f16_to_f32(static_cast<const uint16_t*>(p)[i])
                            : static_cast<const float*>(p)[i];
}

}  // namespace

void f16_mad_keys(int64_t n_keys, const F16Key* keys, int64_t n, uint16_t* y, const char* rows,
                  size_t row_bytes) {
  int64_t i0 = 0;
  if (cpu_has_avx2()) {
    i0 = n / 8 * 8;
    f16_mad_keys_avx2(n_keys, keys, i0, y, rows, row_bytes);
    if (i0 == n) return;
  }
  for (int64_t e = 0; e < n_keys; ++e) {
    const F16Key& key = keys[e];
    const auto* x = reinterpret_cast<const uint16_t*>(rows + static_cast<size_t>(key.row) * row_bytes);
    for (int64_t i = i0; i < n; ++i) {
      if (key.scale != 1.0f) y[i] = f32_to_f16(f16_to_f32(y[i]) * key.scale);
      y[i] = f32_to_f16(std::fma(f16_to_f32(x[i]), key.weight, f16_to_f32(y[i])));
    }
  }
}

void f32_mad_rows(int nq, int64_t n_rows, int64_t n, float* const* y, const char* rows, size_t row_bytes,
                  DType x_type, const float* const* v, bool skip_zero_weights) {
  int64_t i0 = 0;
  if (cpu_has_avx2()) {
    i0 = n / 8 * 8;
    f32_mad_rows_avx2(nq, n_rows, i0, y, rows, row_bytes, x_type, v, skip_zero_weights);
    if (i0 == n) return;
  }
  for (int qi = 0; qi < nq; ++qi) {
    for (int64_t j = 0; j < n_rows; ++j) {
      if (skip_zero_weights && v[qi][j] == 0.0f) continue;
      const char* x = rows + static_cast<size_t>(j) * row_bytes;
      for (int64_t i = i0; i < n; ++i) y[qi][i] = std::fma(load(x_type, x, i), v[qi][j], y[qi][i]);
    }
  }
}

void transpose_rows_f32(int64_t n_rows, int64_t dk, const char* rows, size_t row_bytes, DType type,
                        float* out, int64_t ld) {
  int64_t j = 0;
  if (cpu_has_avx2() && dk % 8 == 0) {
    for (; j + 8 <= n_rows; j += 8)
      transpose_rows8_f32_avx2(dk, rows + j * row_bytes, row_bytes, type, out + j, ld);
  }
  for (; j < n_rows; ++j) {
    const char* row = rows + j * row_bytes;
    for (int64_t e = 0; e < dk; ++e) out[e * ld + j] = load(type, row, e);
  }
}

void dot_cols_sequential(int nq, int64_t n_cols, int64_t dk, const float* kt, int64_t ld,
                         const float* const* q, float* const* out) {
  int64_t j = 0;
  if (cpu_has_avx2()) {
    j = n_cols / 8 * 8;
    dot_cols_sequential_avx2(nq, j, dk, kt, ld, q, out);
  }
  for (; j < n_cols; ++j) {
    for (int qi = 0; qi < nq; ++qi) {
      float dot = 0.0f;
      for (int64_t e = 0; e < dk; ++e) dot = std::fma(kt[e * ld + j], q[qi][e], dot);
      out[qi][j] = dot;
    }
  }
}

void dot_cols_vec_dot_f32(int nq, int64_t n_cols, int64_t dk, const float* kt, int64_t ld,
                          const float* const* q, float* const* out) {
  if (cpu_has_avx2()) return dot_cols_vec_dot_f32_avx2(nq, (n_cols + 7) / 8 * 8, dk, kt, ld, q, out);
  for (int qi = 0; qi < nq; ++qi) {  // vec_dot_f32: products added in double in order
    for (int64_t j = 0; j < n_cols; ++j) {
      double dot = 0.0;
      for (int64_t e = 0; e < dk; ++e) dot += static_cast<double>(kt[e * ld + j] * q[qi][e]);
      out[qi][j] = static_cast<float>(dot);
    }
  }
}

void reduce_add_16_rows(int64_t n, const float* rows, int64_t ld, float* out) {
  int64_t i = 0;
  if (cpu_has_avx2()) {
    i = n / 8 * 8;
    reduce_add_16_rows_avx2(i, rows, ld, out);
  }
  for (; i < n; ++i) {
    float v[16];
    for (int s = 0; s < 16; ++s) v[s] = rows[s * ld + i];
    out[i] = reduce_add_16(v);
  }
}

float scale_add_mask_max(int64_t n, float* w, float scale, const float* mv) {
  int64_t i = 0;
  float max = -INFINITY;
  if (cpu_has_avx2()) {
    i = n / 8 * 8;
    max = scale_add_mask_max_avx2(i, w, scale, mv);
  }
  for (; i < n; ++i) {
    w[i] = mv[i] == -INFINITY ? -INFINITY : w[i] * scale + mv[i];
    max = ops::fmax_of(max, w[i]);
  }
  return max;
}

uint64_t visible_bits(int64_t n, const float* mv) {
  int64_t i = 0;
  uint64_t bits = 0;
  if (cpu_has_avx2()) {
    i = n / 8 * 8;
    bits = visible_bits_avx2(i, mv);
  }
  for (; i < n; ++i) bits |= static_cast<uint64_t>(mv[i] != -INFINITY) << i;
  return bits;
}

float reduce_add_16(const float* v) {
  if (cpu_has_avx2()) return reduce_add_16_avx2(v);
  float h[8], q[4];
  for (int i = 0; i < 8; ++i) h[i] = v[8 + i] + v[i];
  for (int i = 0; i < 4; ++i) q[i] = h[4 + i] + h[i];
  return (q[0] + q[2]) + (q[1] + q[3]);
}

double sum_chunks16(int64_t n, const float* w) {
  double sum = 0.0;
  int64_t c = 0;
  for (; c + 16 <= n; c += 16) sum += static_cast<double>(reduce_add_16(w + c));
  if (c < n) {
    float lane[16] = {};
    std::copy(w + c, w + n, lane);
    sum += static_cast<double>(reduce_add_16(lane));
  }
  return sum;
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
