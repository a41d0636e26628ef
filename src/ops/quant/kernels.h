// Per-format row functions behind quant.h's traits table (internal to src/ops/quant and its tests).
// Every `n` is a count of values and a multiple of the format's block size (asserted by callers
// through quant.h). Names follow ggml's so the specification is easy to find.
#pragma once

#include <cstddef>
#include <cstdint>

#include "ops/quant/blocks.h"

namespace kiln::quant {

// ggml's 4-bit non-linear levels of IQ4_NL. ref: ggml-common.h kvalues_iq4nl
inline constexpr int8_t kValuesIQ4NL[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                            1,    13,   25,  38,  53,  69,  89,  113};

// The signed 6-bit scale (-32..31) of sub-block ib (0..7) of an IQ4_XS block.
inline int iq4_xs_scale(const BlockIQ4XS& b, int ib) {
  const int lo = (b.scales_l[ib / 2] >> (4 * (ib % 2))) & 0xf;
  const int hi = (b.scales_h >> (2 * ib)) & 3;
  return (lo | (hi << 4)) - 32;
}

// --- dequantization (bit-exact with ggml's dequantize_row_*)
void dequantize_row_q4_0(const BlockQ4_0* x, float* y, int64_t n);
void dequantize_row_q4_1(const BlockQ4_1* x, float* y, int64_t n);
void dequantize_row_q5_0(const BlockQ5_0* x, float* y, int64_t n);
void dequantize_row_q5_1(const BlockQ5_1* x, float* y, int64_t n);
void dequantize_row_q8_0(const BlockQ8_0* x, float* y, int64_t n);
void dequantize_row_q8_1(const BlockQ8_1* x, float* y, int64_t n);
void dequantize_row_q2_K(const BlockQ2_K* x, float* y, int64_t n);
void dequantize_row_q3_K(const BlockQ3_K* x, float* y, int64_t n);
void dequantize_row_q4_K(const BlockQ4_K* x, float* y, int64_t n);
void dequantize_row_q5_K(const BlockQ5_K* x, float* y, int64_t n);
void dequantize_row_q6_K(const BlockQ6_K* x, float* y, int64_t n);
void dequantize_row_q8_K(const BlockQ8_K* x, float* y, int64_t n);
void dequantize_row_iq4_nl(const BlockIQ4NL* x, float* y, int64_t n);
void dequantize_row_iq4_xs(const BlockIQ4XS* x, float* y, int64_t n);

// --- reference quantizers (ggml's quantize_row_*_ref: deterministic, used to write model files)
void quantize_row_q4_0_ref(const float* x, BlockQ4_0* y, int64_t n);
void quantize_row_q4_1_ref(const float* x, BlockQ4_1* y, int64_t n);
void quantize_row_q5_0_ref(const float* x, BlockQ5_0* y, int64_t n);
void quantize_row_q5_1_ref(const float* x, BlockQ5_1* y, int64_t n);
void quantize_row_q8_0_ref(const float* x, BlockQ8_0* y, int64_t n);
void quantize_row_q8_1_ref(const float* x, BlockQ8_1* y, int64_t n);
void quantize_row_q2_K_ref(const float* x, BlockQ2_K* y, int64_t n);
void quantize_row_q3_K_ref(const float* x, BlockQ3_K* y, int64_t n);
void quantize_row_q4_K_ref(const float* x, BlockQ4_K* y, int64_t n);
void quantize_row_q5_K_ref(const float* x, BlockQ5_K* y, int64_t n);
void quantize_row_q6_K_ref(const float* x, BlockQ6_K* y, int64_t n);
void quantize_row_q8_K_ref(const float* x, BlockQ8_K* y, int64_t n);
void quantize_row_iq4_nl_ref(const float* x, BlockIQ4NL* y, int64_t n);
// ggml's IQ4_XS reference quantizer is its chunk quantizer without weights (it searches: ntry 7).
void quantize_row_iq4_xs_ref(const float* x, BlockIQ4XS* y, int64_t n);

// --- chunk quantizers (ggml's quantize_<type>): nrows rows of n_per_row values, optional
// importance weights qw [n_per_row]; qw == nullptr takes llama.cpp's no-imatrix path. Return bytes.
size_t quantize_q4_0(const float* src, void* dst, int64_t nrows, int64_t n_per_row, const float* qw);
size_t quantize_q4_1(const float* src, void* dst, int64_t nrows, int64_t n_per_row, const float* qw);
size_t quantize_q5_0(const float* src, void* dst, int64_t nrows, int64_t n_per_row, const float* qw);
size_t quantize_q5_1(const float* src, void* dst, int64_t nrows, int64_t n_per_row, const float* qw);
size_t quantize_q8_0(const float* src, void* dst, int64_t nrows, int64_t n_per_row, const float* qw);
size_t quantize_q2_K(const float* src, void* dst, int64_t nrows, int64_t n_per_row, const float* qw);
size_t quantize_q3_K(const float* src, void* dst, int64_t nrows, int64_t n_per_row, const float* qw);
size_t quantize_q4_K(const float* src, void* dst, int64_t nrows, int64_t n_per_row, const float* qw);
size_t quantize_q5_K(const float* src, void* dst, int64_t nrows, int64_t n_per_row, const float* qw);
size_t quantize_q6_K(const float* src, void* dst, int64_t nrows, int64_t n_per_row, const float* qw);
size_t quantize_iq4_nl(const float* src, void* dst, int64_t nrows, int64_t n_per_row, const float* qw);
size_t quantize_iq4_xs(const float* src, void* dst, int64_t nrows, int64_t n_per_row, const float* qw);

// --- activation quantizers as ggml's x86 CPU backend runs them before its dot products
// (ggml-cpu/arch/x86/quants.c): scale amax/127 (F16), multiplier 127/amax, round half to even.
void quantize_row_q8_0_x86(const float* x, BlockQ8_0* y, int64_t n);
void quantize_row_q8_1_x86(const float* x, BlockQ8_1* y, int64_t n);  // s = F16(d * sum(qs)), d F32
// Q8_K on x86 is the reference quantizer: quantize_row_q8_K_ref.

// --- scalar reference dot products: *s = sum_i w[i] * a[i]
void vec_dot_q4_0_q8_0(int64_t n, float* s, const BlockQ4_0* x, const BlockQ8_0* y);
void vec_dot_q4_1_q8_1(int64_t n, float* s, const BlockQ4_1* x, const BlockQ8_1* y);
void vec_dot_q5_0_q8_0(int64_t n, float* s, const BlockQ5_0* x, const BlockQ8_0* y);
void vec_dot_q5_1_q8_1(int64_t n, float* s, const BlockQ5_1* x, const BlockQ8_1* y);
void vec_dot_q8_0_q8_0(int64_t n, float* s, const BlockQ8_0* x, const BlockQ8_0* y);
void vec_dot_iq4_nl_q8_0(int64_t n, float* s, const BlockIQ4NL* x, const BlockQ8_0* y);
void vec_dot_q2_K_q8_K(int64_t n, float* s, const BlockQ2_K* x, const BlockQ8_K* y);
void vec_dot_q3_K_q8_K(int64_t n, float* s, const BlockQ3_K* x, const BlockQ8_K* y);
void vec_dot_q4_K_q8_K(int64_t n, float* s, const BlockQ4_K* x, const BlockQ8_K* y);
void vec_dot_q5_K_q8_K(int64_t n, float* s, const BlockQ5_K* x, const BlockQ8_K* y);
void vec_dot_q6_K_q8_K(int64_t n, float* s, const BlockQ6_K* x, const BlockQ8_K* y);
void vec_dot_iq4_xs_q8_K(int64_t n, float* s, const BlockIQ4XS* x, const BlockQ8_K* y);
void vec_dot_f16(int64_t n, float* s, const uint16_t* x, const uint16_t* y);   // double accumulation
void vec_dot_bf16(int64_t n, float* s, const uint16_t* x, const uint16_t* y);  // double accumulation
void vec_dot_f32(int64_t n, float* s, const float* x, const float* y);         // double accumulation

// --- the same dot products in the float order of ggml's x86 repacked 8-row kernels (one FMA per
// block into one accumulator; see vec_dot_rows8.cpp). Bit-exact scalar references.
void vec_dot_q4_0_q8_0_rows8(int64_t n, float* s, const BlockQ4_0* x, const BlockQ8_0* y);
void vec_dot_iq4_nl_q8_0_rows8(int64_t n, float* s, const BlockIQ4NL* x, const BlockQ8_0* y);
void vec_dot_q4_K_q8_K_rows8(int64_t n, float* s, const BlockQ4_K* x, const BlockQ8_K* y);
// Q4_K in the order of ggml's 4-row gemm kernel (Q4_0 / IQ4_NL gemm equal their rows8 order).
void vec_dot_q4_K_q8_K_rows8_x4(int64_t n, float* s, const BlockQ4_K* x, const BlockQ8_K* y);

// --- the kernel level (cpu_level.cpp): the widest instruction set the SIMD variants may use on this
// machine, detected once. KILN_CPU=scalar|avx2|avx512 in the environment lowers it, for comparisons
// and tests (never past what the CPU has). Every level gives the same bits: a variant keeps the
// float order of the level below it (tests compare them bit for bit).
enum class CpuLevel { Scalar = 0, Avx2 = 1, Avx512 = 2 };
CpuLevel cpu_detected_level();  // Avx2: AVX2 + FMA + F16C; Avx512: and AVX-512 F, BW, VL, DQ, VNNI
CpuLevel cpu_level();           // min(cpu_detected_level(), KILN_CPU)
// KILN_CPU's value when it is set but not one of the three names (then ignored), else nullptr.
const char* cpu_level_unknown_request();
const char* cpu_level_name(CpuLevel level);  // "scalar", "avx2", "avx512"

// --- AVX2 variants (vec_dot_avx2.cpp; call only when cpu_has_avx2()). Same contracts.
bool cpu_has_avx2();  // cpu_level() >= Avx2
void vec_dot_q4_0_q8_0_avx2(int64_t n, float* s, const BlockQ4_0* x, const BlockQ8_0* y);
void vec_dot_q8_0_q8_0_avx2(int64_t n, float* s, const BlockQ8_0* x, const BlockQ8_0* y);
void vec_dot_q4_K_q8_K_avx2(int64_t n, float* s, const BlockQ4_K* x, const BlockQ8_K* y);
void vec_dot_q6_K_q8_K_avx2(int64_t n, float* s, const BlockQ6_K* x, const BlockQ8_K* y);
void vec_dot_f16_avx2(int64_t n, float* s, const uint16_t* x, const uint16_t* y);
void f32_to_f16_row_avx2(const float* x, uint16_t* y, int64_t n);  // half_rows_avx2.cpp
void f16_to_f32_row_avx2(const uint16_t* x, float* y, int64_t n);
void quantize_row_q8_0_x86_avx2(const float* x, BlockQ8_0* y, int64_t n);  // activation_avx2.cpp
void quantize_row_q8_1_x86_avx2(const float* x, BlockQ8_1* y, int64_t n);
void quantize_row_q8_K_avx2(const float* x, BlockQ8_K* y, int64_t n);  // = quantize_row_q8_K_ref's bytes
void vec_dot_bf16_avx2(int64_t n, float* s, const uint16_t* x, const uint16_t* y);
void vec_dot_f32_avx2(int64_t n, float* s, const float* x, const float* y);
void vec_dot_q4_1_q8_1_avx2(int64_t n, float* s, const BlockQ4_1* x, const BlockQ8_1* y);
void vec_dot_q5_0_q8_0_avx2(int64_t n, float* s, const BlockQ5_0* x, const BlockQ8_0* y);
void vec_dot_q5_1_q8_1_avx2(int64_t n, float* s, const BlockQ5_1* x, const BlockQ8_1* y);
void vec_dot_iq4_nl_q8_0_avx2(int64_t n, float* s, const BlockIQ4NL* x, const BlockQ8_0* y);
void vec_dot_q2_K_q8_K_avx2(int64_t n, float* s, const BlockQ2_K* x, const BlockQ8_K* y);
void vec_dot_q3_K_q8_K_avx2(int64_t n, float* s, const BlockQ3_K* x, const BlockQ8_K* y);
void vec_dot_q5_K_q8_K_avx2(int64_t n, float* s, const BlockQ5_K* x, const BlockQ8_K* y);
// ggml's AVX2 order, which its AVX-512 build also runs: one FMA per super-block into 8 lanes.
void vec_dot_iq4_xs_q8_K_avx2(int64_t n, float* s, const BlockIQ4XS* x, const BlockQ8_K* y);
// AVX2 variants of the *_rows8 order, bit-identical to the scalar references.
void vec_dot_q4_0_q8_0_rows8_avx2(int64_t n, float* s, const BlockQ4_0* x, const BlockQ8_0* y);
void vec_dot_iq4_nl_q8_0_rows8_avx2(int64_t n, float* s, const BlockIQ4NL* x, const BlockQ8_0* y);
void vec_dot_q4_K_q8_K_rows8_avx2(int64_t n, float* s, const BlockQ4_K* x, const BlockQ8_K* y);
void vec_dot_q4_K_q8_K_rows8_x4_avx2(int64_t n, float* s, const BlockQ4_K* x, const BlockQ8_K* y);
// vec_dot_q4_0_q8_0_rows8 of eight weight rows (x + i * x_stride bytes) and four activation rows
// (y + r * y_stride bytes) into s + r * s_stride bytes, [i]; bit-identical to 32 single calls.
void vec_dot_q4_0_q8_0_rows8_8x4_avx2(int64_t n, float* s, size_t s_stride, const BlockQ4_0* x,
                                      size_t x_stride, const BlockQ8_0* y, size_t y_stride);
// The same tile for vec_dot_iq4_nl_q8_0_rows8 (q4_0_lanes_avx2.h).
void vec_dot_iq4_nl_q8_0_rows8_8x4_avx2(int64_t n, float* s, size_t s_stride, const BlockIQ4NL* x,
                                        size_t x_stride, const BlockQ8_0* y, size_t y_stride);

// --- the F16, BF16 and F32 dot products over rows stored in the split-steps order (n a multiple
// of 16; both operands split alike): value e of a row sits at split16_pos(e, n). Each takes the
// same products in the same order as its plain counterpart above (the scalar ones: double
// accumulation in index order; the AVX2 ones: their plain kernels' lanes), so it gives the plain
// rows' bits. The order serves gemm's Split16 weight layout (ops/gemm/layouts.h).
namespace {  // NOLINT: internal linkage, so no AVX2-compiled copy can serve a portable caller
// Values 16s .. 16s + 7 of every 16-value step s at 8s, values 16s + 8 .. 16s + 15 at n / 2 + 8s.
constexpr int64_t split16_pos(int64_t e, int64_t n) {
  return ((e >> 3) & 1) * (n / 2) + ((e >> 4) << 3) + (e & 7);
}
// Where value e of a row sits, for kernels written once for plain rows and split rows of n values.
// kHalvesApart: whether the two 8-value halves of the 16-value steps lie in two separate halves of
// the row (so a kernel can read each half front to back).
struct PlainPos {
  static constexpr bool kHalvesApart = false;
  int64_t operator()(int64_t e) const { return e; }
};
struct Split16Pos {
  static constexpr bool kHalvesApart = true;
  int64_t n;
  int64_t operator()(int64_t e) const { return split16_pos(e, n); }
};
}  // namespace
void vec_dot_f16_split16(int64_t n, float* s, const uint16_t* x, const uint16_t* y);
void vec_dot_bf16_split16(int64_t n, float* s, const uint16_t* x, const uint16_t* y);
void vec_dot_f32_split16(int64_t n, float* s, const float* x, const float* y);
void vec_dot_f16_split16_avx2(int64_t n, float* s, const uint16_t* x, const uint16_t* y);
void vec_dot_bf16_split16_avx2(int64_t n, float* s, const uint16_t* x, const uint16_t* y);
void vec_dot_f32_split16_avx2(int64_t n, float* s, const float* x, const float* y);
// The ends of the three AVX2 split dot products, for kernels that run their main loops themselves
// (ops/gemm's several activation rows per weight read): `lanes` holds the K eight-lane accumulators
// of the main loop (F16, F32: K = 8 over the first n & ~63 values; BF16: K = 4 over the first
// n & ~31) as the vec_dot leaves them, in half-major order (those of the rows' first halves, the
// even ones: accumulator 2c at lanes + 8c; then the odd ones: 2c + 1 at lanes + 8 (K / 2 + c));
// returns what the vec_dot stores (the reduction and the values past the main loop). Call only
// when cpu_has_avx2().
float vec_dot_f16_split16_finish_avx2(int64_t n, const float* lanes, const uint16_t* x, const uint16_t* y);
float vec_dot_bf16_split16_finish_avx2(int64_t n, const float* lanes, const uint16_t* x, const uint16_t* y);
float vec_dot_f32_split16_finish_avx2(int64_t n, const float* lanes, const float* x, const float* y);

// --- AVX-512 variants (*_avx512.cpp; call only when cpu_has_avx512_vnni()). Same contracts.
bool cpu_has_avx512_vnni();  // cpu_level() >= Avx512
bool cpu_has_avx512_bf16();  // cpu_has_avx512_vnni() and AVX512_BF16 present
void vec_dot_q4_0_q8_0_rows8_8x4_avx512(int64_t n, float* s, size_t s_stride, const BlockQ4_0* x,
                                        size_t x_stride, const BlockQ8_0* y, size_t y_stride);
// The byte-product types' vec_dots (vec_dots_simd.h): the *_avx2 kernels' bits.
void vec_dot_q4_1_q8_1_avx512(int64_t n, float* s, const BlockQ4_1* x, const BlockQ8_1* y);
void vec_dot_q5_0_q8_0_avx512(int64_t n, float* s, const BlockQ5_0* x, const BlockQ8_0* y);
void vec_dot_q5_1_q8_1_avx512(int64_t n, float* s, const BlockQ5_1* x, const BlockQ8_1* y);
void vec_dot_iq4_nl_q8_0_avx512(int64_t n, float* s, const BlockIQ4NL* x, const BlockQ8_0* y);
void vec_dot_iq4_xs_q8_K_avx512(int64_t n, float* s, const BlockIQ4XS* x, const BlockQ8_K* y);
void vec_dot_q2_K_q8_K_avx512(int64_t n, float* s, const BlockQ2_K* x, const BlockQ8_K* y);
void vec_dot_q3_K_q8_K_avx512(int64_t n, float* s, const BlockQ3_K* x, const BlockQ8_K* y);
void vec_dot_q4_K_q8_K_avx512(int64_t n, float* s, const BlockQ4_K* x, const BlockQ8_K* y);
void vec_dot_q5_K_q8_K_avx512(int64_t n, float* s, const BlockQ5_K* x, const BlockQ8_K* y);
void vec_dot_q6_K_q8_K_avx512(int64_t n, float* s, const BlockQ6_K* x, const BlockQ8_K* y);
void vec_dot_iq4_nl_q8_0_rows8_avx512(int64_t n, float* s, const BlockIQ4NL* x, const BlockQ8_0* y);
void vec_dot_iq4_nl_q8_0_rows8_8x4_avx512(int64_t n, float* s, size_t s_stride, const BlockIQ4NL* x,
                                          size_t x_stride, const BlockQ8_0* y, size_t y_stride);

}  // namespace kiln::quant
