// Quantized and half-precision row formats: conversion, quantization and dot products, bit-exact
// with ggml (ref: ggml/src/ggml-quants.c, ggml-cpu/quants.c, ggml-cpu/arch/x86/quants.c).
//
// How mul_mat uses this table (as ggml's CPU backend does): for weights of type W,
//   const QuantTraits* tw = quant_traits(W);
//   tw->act_from_float(activation_row, act_buf, k);   // act_buf: row_size(tw->vec_dot_type, k)
//   tw->vec_dot(k, &out, weight_row, act_buf);         // sum_i w[i] * a[i]
// k must be a multiple of block_size(W) (and of block_size(vec_dot_type), which always holds).
// All functions are pure over their arguments and thread-safe; rows must not overlap.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/dtype.h"

namespace kiln {

using ToFloatFn = void (*)(const void* src, float* dst, int64_t n);
using FromFloatFn = void (*)(const float* src, void* dst, int64_t n);
// *out = dot(w[0..n), a[0..n)); w of the weight type, a of its vec_dot_type.
using VecDotFn = void (*)(int64_t n, float* out, const void* w, const void* a);
// Eight weight rows against four activation rows (strides in bytes): for i in 0..7, r in 0..3,
//   ((float*)((char*)out + r * out_stride))[i] = dot((char*)w + i * w_stride, (char*)a + r * a_stride).
using VecDot8x4Fn = void (*)(int64_t n, float* out, size_t out_stride, const void* w, size_t w_stride,
                             const void* a, size_t a_stride);

struct QuantTraits {
  DType type;
  DType vec_dot_type;          // the activation format of vec_dot (ggml's vec_dot_type)
  ToFloatFn to_float;          // dequantize n values (ggml's dequantize_row_* / to_float), bit-exact
  FromFloatFn from_float;      // F32 -> this type as ggml's x86 CPU backend converts (its Cpy and
                               // activation path): the reference quantizer for weight formats, the
                               // AVX2-rounding quantizer for Q8_0/Q8_1 (ties to even), the reference's
                               // bytes for Q8_K (AVX2 CPUs: a vectorized copy of it). quantize_chunk
                               // (model files) always uses the reference quantizers.
  FromFloatFn act_from_float;  // F32 -> vec_dot_type: quant_traits(vec_dot_type)->from_float
  VecDotFn vec_dot;            // fastest variant this CPU supports
  VecDotFn vec_dot_ref;        // the scalar reference the SIMD variants are tested against
  // The dot product in the float order of ggml's repacked 8-row kernels, which llama.cpp uses on
  // AVX2 CPUs for 2-D weights of this type with a multiple of 8 rows (Q4_0, IQ4_NL, Q4_K; see
  // ops/quant/vec_dot_rows8.cpp). nullptr where ggml does not repack the type on this CPU. Same
  // contract as vec_dot; mul_mat prefers it for such weights so that logits match llama.cpp's.
  VecDotFn vec_dot_rows8 = nullptr;
  VecDotFn vec_dot_rows8_ref = nullptr;  // its scalar reference (bit-identical)
  // ggml runs the first (n - n % 4) of n activation rows through 4-row gemm kernels whose order can
  // differ from the 1-row one: these dot products follow it (set whenever vec_dot_rows8 is).
  VecDotFn vec_dot_rows8_x4 = nullptr;
  VecDotFn vec_dot_rows8_x4_ref = nullptr;
  // vec_dot_rows8_x4 for a tile of 8 weight rows x 4 activation rows, bit-identical to 32 calls
  // of it: each weight block is unpacked once for the four activation rows and the eight
  // outputs' accumulators sit in one vector (what makes batched decode cheaper per token).
  // Set for Q4_0 and IQ4_NL on AVX2 CPUs; nullptr where no such kernel exists (call
  // vec_dot_rows8_x4 per output).
  VecDot8x4Fn vec_dot_rows8_x4_8x4 = nullptr;
};

// Traits for F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q8_1, Q2_K..Q6_K, Q8_K, IQ4_NL, IQ4_XS;
// nullptr for any other type. Q8_1 and Q8_K are activation formats: their vec_dot is null.
const QuantTraits* quant_traits(DType t);

// Whether quantize_chunk can produce `t` (F32, F16, BF16 and the weight formats above; not the
// activation-only Q8_1/Q8_K).
bool quantize_supported(DType t);

// Quantizes nrows rows of n_per_row values [nrows, n_per_row] into dst (row_size(t, n_per_row)
// bytes per row) as ggml_quantize_chunk does, and returns the bytes written. imatrix (nullable)
// holds n_per_row importance weights per column; null takes the same path as llama.cpp's quantizer
// without an imatrix. Preconditions (asserted): quantize_supported(t), n_per_row % block_size(t) == 0.
size_t quantize_chunk(DType t, const float* src, void* dst, int64_t nrows, int64_t n_per_row,
                      const float* imatrix);

}  // namespace kiln
