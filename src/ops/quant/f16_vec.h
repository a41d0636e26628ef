// F16 vector updates of the flash-attention accumulator, element by element as ggml's SIMD builds
// compute them (ggml_vec_mad_f16, ggml_vec_scale_f16: widen to F32, one FMA or multiply, round to
// nearest even): the AVX2 + F16C variant gives the scalar one's bits. y and x must not overlap.
#pragma once

#include <cstdint>

namespace kiln::quant {

// y[i] = f16(fma(f32(x[i]), v, f32(y[i]))) for i in [0, n).
void f16_mad(int64_t n, uint16_t* y, const uint16_t* x, float v);
// y[i] = f16(f32(y[i]) * s) for i in [0, n).
void f16_scale(int64_t n, uint16_t* y, float s);

}  // namespace kiln::quant
