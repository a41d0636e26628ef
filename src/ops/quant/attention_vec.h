// Vector kernels of attention (ops/attention.cpp: the flash path, and the plain path in blocks of
// queries), each giving exactly the bits of its element-by-element form below (AVX2 + F16C
// variants where the CPU has them, else that form): they only batch independent per-element
// operations, never reorder a sum. y and x must not overlap.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/dtype.h"

namespace kiln::quant {

// The F16 accumulator of the one-query path over a run of keys, as ggml's SIMD builds update it key
// after key (ggml_vec_scale_f16, ggml_vec_mad_f16: widen to F32, one multiply or FMA, round to
// nearest even). Key e of the run, in order: when keys[e].scale != 1 (a new running maximum),
// y[i] = f16(f32(y[i]) * scale); then y[i] = f16(fma(f32(x[i]), keys[e].weight, f32(y[i]))) for i
// in [0, n), x the F16 row at rows + keys[e].row * row_bytes. (The SIMD form keeps chunks of y in
// registers, widened, over the whole run: the same roundings, no store and reload per key.)
struct F16Key {
  int32_t row;
  float scale;
  float weight;
};
void f16_mad_keys(int64_t n_keys, const F16Key* keys, int64_t n, uint16_t* y, const char* rows,
                  size_t row_bytes);

// The tiled path's kernels take up to kMaxQueries query rows at once (the same K or V rows for
// all of them, loaded once; six is ggml's AVX2 simd_gemm tile, 6 rows x 16 columns in twelve
// registers); each query's results are bit for bit those of a call for it alone.
inline constexpr int kMaxQueries = 6;

// F32 accumulators over V rows: for each query qi in [0, nq), for each row j in [0, n_rows) in
// order, y[qi][i] = fma(f32(x_j[i]), v[qi][j], y[qi][i]) for i in [0, n); row x_j at
// rows + j * row_bytes, of type `x_type` (F32 or F16). With skip_zero_weights, a row whose weight
// v[qi][j] is exactly 0 is skipped for that query (the flash path's masked keys, which ggml
// skips); without, it is applied as ggml's mul_mat applies a zero probability (which differs only
// when y[qi][i] is -0 or x_j[i] is not finite). (The SIMD form keeps a chunk of each y in
// registers over all the rows: the same chain of FMAs per element.)
void f32_mad_rows(int nq, int64_t n_rows, int64_t n, float* const* y, const char* rows, size_t row_bytes,
                  DType x_type, const float* const* v, bool skip_zero_weights);

// The tiled path's K tile, once per tile for a block of queries: out[e * ld + j] = f32(row_j[e])
// for rows j in [0, n_rows) (row j at rows + j * row_bytes, `type` F32 or F16) and e in [0, dk).
// ld >= n_rows.
void transpose_rows_f32(int64_t n_rows, int64_t dk, const char* rows, size_t row_bytes, DType type,
                        float* out, int64_t ld);

// The tiled path's q k^T from a transposed tile (transpose_rows_f32's `out`), each product one
// chain of FMAs in order of e: out[qi][j] = fma(kt[(dk - 1) * ld + j], q[qi][dk - 1], ... fma(kt[j],
// q[qi][0], 0)) for j in [0, n_cols), qi in [0, nq).
void dot_cols_sequential(int nq, int64_t n_cols, int64_t dk, const float* kt, int64_t ld,
                         const float* const* q, float* const* out);

// The plain path's scores of an F32 K from a transposed tile (transpose_rows_f32's `out`):
// out[qi][j] = the bits of F32's vec_dot (quant_traits(DType::F32)->vec_dot) of column j (kt[e * ld
// + j], e in [0, dk)) and q[qi], for j in [0, n_cols), qi in [0, nq). kt and each out[qi] must
// hold n_cols rounded up to 8 columns (the extra ones are computed from whatever kt holds there).
void dot_cols_vec_dot_f32(int nq, int64_t n_cols, int64_t dk, const float* kt, int64_t ld,
                          const float* const* q, float* const* out);

// The sums over 16 rows, each as reduce_add_16 adds 16 values: out[i] = reduce_add_16 of
// rows[s * ld + i] for s in [0, 16), i in [0, n).
void reduce_add_16_rows(int64_t n, const float* rows, int64_t ld, float* out);

// The tiled path's masked scores: w[i] = mv[i] == -inf ? -inf : w[i] * scale + mv[i] for i in
// [0, n) (a product rounded, then a sum: no FMA); returns the largest of the new values, NaNs
// ignored (-inf when all are NaN or masked, or n is 0).
float scale_add_mask_max(int64_t n, float* w, float scale, const float* mv);

// Which of n <= 64 mask values leave their key visible: bit i is set unless mv[i] == -inf (a NaN
// counts as visible).
uint64_t visible_bits(int64_t n, const float* mv);

// The softmax numerators: w[i] = expf_ggml_avx512(w[i] - max) for i in [0, n) (simd_math.h).
void exp_shifted_ggml(int64_t n, float* w, float max);

// Sum of 16 lanes as GCC's _mm512_reduce_add_ps: halves, quarters, then (0 + 2) + (1 + 3).
float reduce_add_16(const float* v);

// The sum of w[0..n) as ggml_vec_soft_max_f32 (AVX-512) adds it: chunks of 16 values (a partial
// last chunk padded with zeros), each reduced in F32 as GCC's _mm512_reduce_add_ps (halves,
// quarters, then (0 + 2) + (1 + 3)), the chunks added in double in order.
double sum_chunks16(int64_t n, const float* w);

}  // namespace kiln::quant
