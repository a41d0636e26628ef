// SiLU over a row as ggml's AVX-512 CPU build computes it (the build llama.cpp's reference outputs
// come from; ref: ggml_vec_silu_f32, ggml_vec_swiglu_f32 in ggml-cpu/vec.cpp): ggml_v_silu
// (silu_ggml_avx512) over the first n - n % 16 values, ggml_silu_f32 (libm expf) over the rest.
// Rows are contiguous; y may be x (or g).
#pragma once

#include <cstdint>

namespace kiln::quant {

// Whether value i of a row of n takes ggml_v_silu's arithmetic (else ggml_silu_f32's).
inline bool silu_vectorised(int64_t i, int64_t n) { return i < n - n % 16; }

// silu of value i (= x) of a row of n, by that rule (for rows that are not contiguous).
float silu_ggml_at(int64_t i, int64_t n, float x);

// y[i] = silu(x[i]).
void silu_row_ggml(int64_t n, float* y, const float* x);
// y[i] = silu(x[i]) * g[i].
void swiglu_row_ggml(int64_t n, float* y, const float* x, const float* g);

// AVX2 bodies (silu_rows_avx2.cpp): the ggml_v_silu part only; n a multiple of 8.
void silu_ggml_avx2(int64_t n, float* y, const float* x);
void swiglu_ggml_avx2(int64_t n, float* y, const float* x, const float* g);

}  // namespace kiln::quant
