// Functions evaluated through a table of every F16 value, as ggml's CPU backend computes GELU
// (GGML_GELU_FP16 / GGML_GELU_QUICK_FP16: ggml_table_gelu_f16, ggml_table_gelu_quick_f16).
#pragma once

#include <cstdint>

namespace kiln::quant {

// y[i] = f16_to_f32(table[f32_to_f16(x[i])]) for i in [0, n) (core/half.h: rounding to nearest,
// ties to even; F16C where the CPU has it). table has 65536 entries; y may be x.
void f16_lookup_row(int64_t n, float* y, const float* x, const uint16_t* table);

// The AVX2 + F16C body (f16_lookup_avx2.cpp); n a multiple of 8.
void f16_lookup_avx2(int64_t n, float* y, const float* x, const uint16_t* table);

}  // namespace kiln::quant
