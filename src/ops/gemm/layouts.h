// Byte layouts of the prepared weights and the activation formats of the matrix families
// (gemm.h), and the kernels over them (internal to src/ops/gemm and its tests).
//
// Prepared layouts keep eight weight rows side by side so that a kernel holds one row per 32-bit
// lane of a vector: a dot product of four weight bytes with four activation bytes broadcast to all
// lanes adds to eight rows' sums at once, with no horizontal reductions and no per-use transposes.
// Quants stay unsigned nibbles (the unsigned operand of vpmaddubsw); offsets are applied to the
// integer sums. The layouts have exactly the plain tensor's bytes (Q4_0, Q8_0) or 2.8% more (Q4_K:
// the 6-bit scales and mins stored as bytes).
// A group is a sequence of blocks, each its eight rows' scales and then their quants, so that a
// kernel reads a group front to back as one stream: with every scale of a group first and its
// quants after, the hardware prefetchers of a Zen 4 kept a one-token product at half the machine's
// streaming rate (docs/performance.md, "One stream per group").
#pragma once

#include <cstddef>
#include <cstdint>

#include "ops/gemm/gemm.h"
#include "ops/quant/blocks.h"

namespace kiln::gemm {

// Activations of the Q8_0 families (Q4_0 and Q8_0 weights): ggml's x86 Q8_0 quantization (the
// same levels and scale as quant.h's Q8_0 from_float), with the scale widened to F32 and the sum
// of the levels kept, times 8 (what the Q4_0 kernels subtract for the nibble offset).
struct ActQ8_0 {
  float d;       // the F16 scale of the Q8_0 block, widened (exact)
  int32_t sum8;  // 8 * sum(qs)
  int8_t qs[32];
};
static_assert(sizeof(ActQ8_0) == 40);
void convert_act_q8_0(const float* x, void* dst, int64_t k);

// TensorLayout::Q4_0x8: rows 8g .. 8g+7 form group g, stored at g * (nb * 144) bytes (nb = k / 32
// blocks per row) as nb blocks of 144 bytes, block b at b * 144:
//   uint16_t d[8]         block b's F16 scale of row i at d[i]
//   uint8_t  q[4][8][4]   q[m][i] = bytes 4m .. 4m+3 of row i's block b qs: low nibbles are
//                         elements 4m .. 4m+3, high nibbles elements 16+4m .. 16+4m+3 (as stored).
inline constexpr size_t kQ4_0x8BlockBytes = 8 * 18;  // per block of a group
inline constexpr size_t kQ4_0x8ScaleBytes = 16;      // d[8]; q follows
void prepare_q4_0x8(const char* rows, size_t row_bytes, int64_t n_rows, int64_t k, uint8_t* dst);
// Order: vec_dot_q4_0_q8_0_rows8 per output (acc = fma(float(isum), d_w * d_a, acc) per block).
void gemm_q4_0x8(const Tile& t);       // scalar: the portable kernel and the oracle
void gemm_q4_0x8_avx2(const Tile& t);  // call only when quant::cpu_has_avx2()
void gemm_q4_0x8_avx512(const Tile& t);  // call only when quant::cpu_has_avx512_vnni()

// TensorLayout::Q4_Kx8: rows 8g .. 8g+7 form group g, stored at g * (nsb * 1184) bytes (nsb =
// k / 256 super-blocks per row) as nsb super-blocks of 1184 bytes, super-block s at s * 1184: a
// header, then the quants.
struct Q4Kx8Header {
  uint16_t d[8], dmin[8];  // super-block scales of rows 0..7 (F16)
  uint8_t scales[8][8];    // scales[j][i]: sub-block j's 6-bit scale of row i
  uint8_t mins[4][8][2];   // mins[p][i][h]: sub-block 2p+h's 6-bit min of row i
};
static_assert(sizeof(Q4Kx8Header) == 160);
//   uint8_t q[4][8][8][4]  q[p][m][i] = bytes 4m .. 4m+3 of row i's qs[32p .. 32p+31] in super-block
//                          s: low nibbles are elements 64p+4m .. (sub-block 2p), high nibbles
//                          64p+32+4m .. (sub-block 2p+1), as stored.
inline constexpr size_t kQ4_Kx8SuperBytes = sizeof(Q4Kx8Header) + 1024;
void prepare_q4_Kx8(const char* rows, size_t row_bytes, int64_t n_rows, int64_t k, uint8_t* dst);
// Order: vec_dot_q4_K_q8_K_rows8_x4 per output for the first Tile::n_gemm_act activation rows
// (ggml_gemm_q4_K_8x8_q8_K), vec_dot_q4_K_q8_K_rows8 for the rest (ggml_gemv_q4_K_8x8_q8_K);
// activations are Q8_K blocks.
void gemm_q4_Kx8(const Tile& t);
void gemm_q4_Kx8_avx2(const Tile& t);
void gemm_q4_Kx8_avx512(const Tile& t);  // call only when quant::cpu_has_avx512_vnni()

// Plain Q8_0 weights with ActQ8_0 activations, in ggml's AVX2 vec_dot_q8_0_q8_0 order: per block,
// lanes l = 0..7 add fma(d_w * d_a, float(sum of products 4l .. 4l+3), lane); at the end the lanes
// are summed as hsum_float_8 ((l + l+4) pairs, then (0+2, 1+3), then 0+1).
void gemm_q8_0(const Tile& t);
void gemm_q8_0_avx2(const Tile& t);
void gemm_q8_0_avx512(const Tile& t);  // the AVX2 kernel's bits; call only when quant::cpu_has_avx512_vnni()
// Plain Q5_0, Q4_1 and Q5_1 weights with their vec_dot_type's activations (Q8_0, Q8_1), in the
// order of ggml's AVX2 vec_dots (quant.h's vec_dot_*_avx2), which llama.cpp runs for every batch
// size on AVX2 and AVX-512 CPUs (no repack takes these types; tinyBLAS_Q0_AVX, which takes Q5_0
// prompts, has the vec_dot's order): per block, lanes as gemm_q8_0's with the levels (Q5_0:
// nibble | bit << 4, less 16; Q4_1: nibble; Q5_1: nibble | bit << 4); Q4_1 and Q5_1 also add
// float(m_w) * float(s_a) per block to a float sum, added to the lanes' reduce_lanes8 at the end.
// AVX2 CPUs only (elsewhere these types keep their scalar vec_dots' order).
void gemm_q5_0(const Tile& t);
void gemm_q5_0_avx2(const Tile& t);
void gemm_q5_0_avx512(const Tile& t);  // the AVX2 kernel's bits; call only when quant::cpu_has_avx512_vnni()
void gemm_q4_1(const Tile& t);
void gemm_q4_1_avx2(const Tile& t);
void gemm_q4_1_avx512(const Tile& t);  // the AVX2 kernel's bits; call only when quant::cpu_has_avx512_vnni()
void gemm_q5_1(const Tile& t);
void gemm_q5_1_avx2(const Tile& t);
void gemm_q5_1_avx512(const Tile& t);  // the AVX2 kernel's bits; call only when quant::cpu_has_avx512_vnni()

// TensorLayout::Q8_0x8: rows 8g .. 8g+7 form group g, stored at g * (nb * 272) bytes (nb = k / 32
// blocks per row) as nb blocks of 272 bytes, block b at b * 272:
//   uint16_t d[8]         block b's F16 scale of row i at d[i]
//   int8_t   q[8][8][4]   q[m][i] = qs[4m .. 4m+3] of row i's block b
// A vector of block b's q[m] holds lane m's four values of eight rows, so the eight lane sums of
// gemm_q8_0's order are eight vectors (one per lane, rows side by side) and the final hsum becomes
// vertical adds. The kernels multiply |a| (unsigned) by w with a's sign, which needs -w to fit in a
// byte: weights holding the level -128 (which ggml's quantization never writes) stay plain
// (q8_0_has_level_min, checked when choosing the layout).
inline constexpr size_t kQ8_0x8BlockBytes = 8 * 34;  // per block of a group
inline constexpr size_t kQ8_0x8ScaleBytes = 16;      // d[8]; q follows
bool q8_0_has_level_min(const char* rows, size_t row_bytes, int64_t n_rows, int64_t k);
void prepare_q8_0x8(const char* rows, size_t row_bytes, int64_t n_rows, int64_t k, uint8_t* dst);
// Activations of the Q8_0x8 family: convert_act_q8_0's levels and scale, and the levels' magnitudes
// (vpmaddubsw's unsigned operand).
struct ActQ8_0Abs {
  float d;
  int8_t qs[32];
  uint8_t abs_qs[32];
};
static_assert(sizeof(ActQ8_0Abs) == 68);
void convert_act_q8_0_abs(const float* x, void* dst, int64_t k);
// Order: gemm_q8_0's per output, so prepared and plain Q8_0 weights give the same bits.
void gemm_q8_0x8(const Tile& t);
void gemm_q8_0x8_avx2(const Tile& t);
void gemm_q8_0x8_avx512(const Tile& t);  // call only when quant::cpu_has_avx512_vnni()

// Plain Q6_K weights with Q8_K activations, in ggml's AVX2 ggml_vec_dot_q6_K_q8_K order (which
// llama.cpp runs for every batch size: no repack exists for Q6_K): per super-block, eight int32
// lanes (lane l: values 32c + 4l .. 32c + 4l + 3 for c = 0..7, each four times its scale, less
// 32 * (bsums[2l] * scales[2l] + bsums[2l + 1] * scales[2l + 1])), each added as
// fma(d_a * d_w, float(lane), acc_l); at the end the lanes are summed as hsum_float_8
// (reduce_lanes8). AVX2 CPUs only (elsewhere Q6_K keeps its scalar vec_dot's order).
void gemm_q6_K(const Tile& t);
void gemm_q6_K_avx2(const Tile& t);
void gemm_q6_K_avx512(const Tile& t);  // the AVX2 kernel's bits; call only when quant::cpu_has_avx512_vnni()
// Plain Q5_K weights with Q8_K activations, in ggml's AVX2 ggml_vec_dot_q5_K_q8_K order: the
// eight lanes as above with one scale per 32 values and no bias, added with fma(d_a * d_w, ...);
// the mins in four lanes (lane m: min[2m] * (bsums[4m] + bsums[4m+1]) + min[2m+1] * (bsums[4m+2] +
// bsums[4m+3])) added with fma(-d_a * dmin_w, ...); the result is reduce_lanes8 of the first plus
// ((m0 + m2) + (m1 + m3)) of the second. AVX2 CPUs only.
void gemm_q5_K(const Tile& t);
void gemm_q5_K_avx2(const Tile& t);
void gemm_q5_K_avx512(const Tile& t);  // the AVX2 kernel's bits; call only when quant::cpu_has_avx512_vnni()
// Plain Q3_K and Q2_K weights with Q8_K activations, in the order of quant.h's
// vec_dot_q3_K_q8_K_avx2 / _q2_K_q8_K_avx2 (llama.cpp on AVX2 CPUs runs its AVX2 vec_dots for every
// batch size; its AVX-512 build repacks Q2_K, see docs/performance.md): the eight lanes as above
// with one scale per 16 values (lane l of chunk c: scale 2c + l / 4), levels -4..3 (Q3_K) or 0..3
// (Q2_K), each added as fma(d_a * d_w, float(lane), acc_l); Q2_K also subtracts, per super-block,
// (d_a * dmin_w) * float(sum of its 16 mins times bsums) from a float sum added to reduce_lanes8 of
// the lanes at the end. AVX2 CPUs only. (ggml's AVX2 Q2_K vec_dot instead adds the mins into the
// eight lanes, fma(-d_a * dmin_w, float(min lane), acc_l) before each super-block's scales, so
// kiln's Q2_K differs from llama.cpp's AVX2 build by float rounding; its AVX-512 build repacks Q2_K
// into yet another order. Q3_K's vec_dot has ggml's order.)
void gemm_q3_K(const Tile& t);
void gemm_q3_K_avx2(const Tile& t);
void gemm_q3_K_avx512(const Tile& t);  // the AVX2 kernel's bits; call only when quant::cpu_has_avx512_vnni()
void gemm_q2_K(const Tile& t);
void gemm_q2_K_avx2(const Tile& t);
void gemm_q2_K_avx512(const Tile& t);  // the AVX2 kernel's bits; call only when quant::cpu_has_avx512_vnni()

// Plain IQ4_XS weights with Q8_K activations (AVX2 CPUs; elsewhere IQ4_XS keeps its scalar
// vec_dot's order). The first Tile::n_gemm_act activation rows in the order of ggml's IQ panel gemm
// (ggml-cpu/iqp.cpp, iqp_gemm_8x8_q8_K and iqp_gemv_8x8_q8_K alike): per super-block the exact
// integer sum of scale * level * activation over its 256 values, added as
// fma(float(sum), d_w * d_a, acc) into one accumulator. The other rows in ggml's AVX2
// ggml_vec_dot_iq4_xs_q8_K order: eight int32 lanes (lane l: values 32 ib + 4l .. 32 ib + 4l + 3 of
// every sub-block ib, times its scale), each added as fma(d_w * d_a, float(lane), acc_l), then
// reduce_lanes8.
void gemm_iq4_xs(const Tile& t);
void gemm_iq4_xs_avx2(const Tile& t);
void gemm_iq4_xs_avx512(const Tile& t);  // the AVX2 kernel's bits; only when quant::cpu_has_avx512_vnni()

// Activations of the F16 and BF16 families: each value rounded to the 16-bit type as the type's
// vec_dot_type conversion does (f32_to_f16_row, f32_to_bf16_row), stored twice: widened to F32
// (exact; k floats), which the prompt kernels load without converting, then as the 16-bit values
// (k values), which the vec_dot reads. The F32 family's activations are the F32 rows themselves.
void convert_act_f16_wide(const float* x, void* dst, int64_t k);
void convert_act_bf16_wide(const float* x, void* dst, int64_t k);
void convert_act_f16_wide_avx2(const float* x, void* dst, int64_t k);  // the same bytes
void convert_act_bf16_wide_avx2(const float* x, void* dst, int64_t k);
// Plain F16, BF16 and F32 weights with those activations, in the order of llamafile's tinyBLAS as
// ggml's AVX-512 build runs it for prompts (tinyBLAS<16, __m512, __m512, T, T, float>: F16 and BF16
// weights with activations converted to their type, F32 with F32): per output, lanes l = 0..15 add
// fma(w[16s + l], a[16s + l], lane) for s = 0 .. k/16 - 1, both widened to F32; at the end
// _mm512_reduce_add_ps (as GCC builds it): lanes l + 8 and l added, then reduce_lanes8. k is a
// multiple of 16. (The AVX2 build's tinyBLAS<8> has eight lanes, and a build with AVX512_BF16 runs
// BF16 through vdpbf16ps, 32 values per step; kiln follows the AVX-512F build's orders, as its F16
// and F32 vec_dots do, which is what the conformance references were made with.)
void gemm_f16(const Tile& t);
void gemm_f16_avx2(const Tile& t);
void gemm_bf16(const Tile& t);
void gemm_bf16_avx2(const Tile& t);
void gemm_f32(const Tile& t);
void gemm_f32_avx2(const Tile& t);

// TensorLayout::Split16 (F16, BF16 and F32 weights, k a multiple of 16): each row keeps its bytes,
// in the split-steps order of quant/kernels.h (value e at split16_pos(e, k)): values 16s .. 16s + 7
// of every 16-value step s first, then values 16s + 8 .. 16s + 15. Lanes 0..7 and 8..15 of
// tinyBLAS's sixteen lane sums each read one contiguous half of the row, so an AVX2 kernel keeps one
// 8-lane accumulator per output and the loads stream (the plain rows' half steps take every other
// 32 bytes; docs/performance.md, "F16 prompts in the split-steps layout"). Its family's activations
// are split alike and of the weights' type (F16 and BF16: the 16-bit values only, k of them, which
// the prompt kernel widens as it loads them, as tinyBLAS's AVX2 kernel does, and the vec_dot reads;
// F32: the F32 row).
void prepare_split16(const char* rows, size_t row_bytes, int64_t n_rows, int64_t k, size_t value_bytes,
                     uint8_t* dst);
// The F16, BF16 and F32 split families' activations in the split-steps order (the same rounding).
void convert_act_f16_split16(const float* x, void* dst, int64_t k);
void convert_act_bf16_split16(const float* x, void* dst, int64_t k);
void convert_act_f32_split16(const float* x, void* dst, int64_t k);
void convert_act_f16_split16_avx2(const float* x, void* dst, int64_t k);  // the same bytes
void convert_act_bf16_split16_avx2(const float* x, void* dst, int64_t k);
// gemm_f16 / _bf16 / _f32 over split rows and split activations: the same bits.
void gemm_f16_split16(const Tile& t);
void gemm_bf16_split16(const Tile& t);
void gemm_f32_split16(const Tile& t);
void gemm_f16_split16_avx2(const Tile& t);
void gemm_bf16_split16_avx2(const Tile& t);
void gemm_f32_split16_avx2(const Tile& t);
// The split families' one-row order (every output the bits of its type's split vec_dot, quant/
// kernels.h) for activation rows r0 .. n_act - 1 of the tile, each weight row read once per group of
// three or four activation rows (split16_rows_avx2.cpp).
void rows_f16_split16_avx2(const Tile& t, int64_t r0);
void rows_bf16_split16_avx2(const Tile& t, int64_t r0);
void rows_f32_split16_avx2(const Tile& t, int64_t r0);

// hsum_float_8's reduction of eight lane sums, in scalar form.
inline float reduce_lanes8(const float l[8]) {
  const float a0 = l[0] + l[4], a1 = l[1] + l[5], a2 = l[2] + l[6], a3 = l[3] + l[7];
  const float b0 = a0 + a2, b1 = a1 + a3;
  return b0 + b1;
}

}  // namespace kiln::gemm
