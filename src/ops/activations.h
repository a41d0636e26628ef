// Scalar activation functions with ggml's CPU arithmetic, shared by the kernels that need them.
#pragma once

#include <cmath>

namespace kiln::ops {

// ref: ggml_silu_f32 (ggml-cpu/vec.h): x / (1 + e^-x) in float.
inline float silu_f32(float x) { return x / (1.0f + std::exp(-x)); }

// ref: ggml_gelu_f32 (tanh approximation) in float.
inline float gelu_tanh_f32(float x) {
  constexpr float kGeluCoefA = 0.044715f;
  constexpr float kSqrt2OverPi = 0.79788456080286535587989211986876f;
  return 0.5f * x * (1.0f + std::tanh(kSqrt2OverPi * x * (1.0f + kGeluCoefA * x * x)));
}

// GELU as ggml's CPU backend computes F32 with GGML_GELU_FP16 (ggml_vec_gelu_f32): 0 at or below
// -10, x at or above 10, otherwise x rounded to F16, looked up in a table of gelu_tanh_f32 over
// every F16 value (each rounded to F16), and widened back to F32.
float gelu_f32(float x);

// ref: ggml_gelu_quick_f32: x / (1 + e^(-1.702 x)) in float.
inline float gelu_quick_exact_f32(float x) { return x * (1.0f / (1.0f + std::exp(-1.702f * x))); }

// Quick GELU as ggml's CPU backend computes F32 with GGML_GELU_QUICK_FP16
// (ggml_vec_gelu_quick_f32): x rounded to F16 and looked up in a table of gelu_quick_exact_f32
// over every F16 value (each rounded to F16), widened back to F32; no clamping.
float gelu_quick_f32(float x);

// ref: ggml_vec_gelu_erf_f32: 0.5 x (1 + erf(x / sqrt(2))) in float, no table.
inline float gelu_erf_f32(float x) {
  constexpr float kSqrt2Inv = 0.70710678118654752440084436210484f;
  return 0.5f * x * (1.0f + std::erf(x * kSqrt2Inv));
}

// y[i] = gelu_f32(x[i]) and y[i] = gelu_quick_f32(x[i]) for i in [0, n), eight at a time where
// the CPU has F16C. y may be x.
void gelu_row(int64_t n, float* y, const float* x);
void gelu_quick_row(int64_t n, float* y, const float* x);

}  // namespace kiln::ops
