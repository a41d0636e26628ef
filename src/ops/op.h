// The kernel interface between src/ops (which computes) and src/runtime (which schedules).
//
// An OpCall is one operation on views: dst = op(src...). Kernels never manage threads: the runtime
// asks plan_kernel() how many phases the op has, how many independent work units each phase has
// and how much scratch it needs, then calls run_kernel() for disjoint unit ranges of a phase from
// any number of threads, with a barrier between phases. run_kernel() allocates nothing.
//
// View-only operations (view, reshape, permute, transpose) are not kernels: the graph expresses
// them as TensorViews over another tensor's memory.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/result.h"
#include "core/tensor_view.h"

namespace kiln {

enum class OpKind : uint8_t {
  GetRows,    // dst[:, i] = src0[:, src1[i]]  (src1: I32 row ids; src0 any type -> F32)
  MulMat,     // dst = src0 (weights [k, n], any supported type) x src1 (F32 [k, m]) -> F32 [n, m]
  Add,        // dst = src0 + src1 (src1 broadcast over rows)
  Mul,        // dst = src0 * src1 (src1 broadcast over rows)
  Scale,      // dst = src0 * params.scale
  RmsNorm,    // per row: x / sqrt(mean(x^2) + eps)
  LayerNorm,  // per row: (x - mean) / sqrt(var + eps)
  Rope,       // rotary embedding; src1: I32 positions; src2 (optional): F32 frequency factors
  SoftMax,    // per row: softmax(x * scale + mask), src1 (optional) F32/F16 mask
  Silu,
  Gelu,
  SwiGlu,      // dst = silu(src0) * src1
  Cpy,         // dst = src0 converted to dst.type (F32/F16/BF16/quantized), any strides
  Concat,      // along params.axis
  ArgMax,      // per row -> I32
  Attention,   // softmax(q k^T * scale + mask) v; src0 q [d, n_q, h, s], src1 k [d, n_kv, h_kv, s],
               // src2 v [d_v, n_kv, h_kv, s] (views over a KV cache; h % h_kv == 0),
               // src3 (optional) F32/F16 mask [n_kv, >= n_q] (broadcast over heads);
               // dst F32 [d_v, n_q, h, s] (any strides: pass a permuted view for [d_v, h, n_q]).
               // params.attn_path picks the arithmetic (see AttentionPath).
  GeluQuick,   // x * sigmoid(1.702 x) (CLIP's quick GELU)
  AvgPool2d,   // mean over params.pool x params.pool windows of a grid of channel vectors
  RmsNormMul,  // per row: RmsNorm(src0) * src1 in one pass, bit for bit RmsNorm then Mul
  SetRows,     // dst[:, src1[i]] = src0[:, i] converted to dst.type (src1: I32 row ids); other rows kept
  GeluErf,     // 0.5 x (1 + erf(x / sqrt(2))) in float (exact GELU, PyTorch's default)
  Im2Col1d,    // the columns of a 1-D convolution: src0 F32 [len, channels, b] -> F16 [channels * k, out_len, b]
  Im2Col2d,    // the columns of a 2-D convolution of a grid of channel vectors: src0 F32 [c, w, h, b] -> F32
               // [c * kh * kw, out_w, out_h, b]
  GroupNorm,   // per item and group of channels: (x - mean) / sqrt(var + eps) over the group's whole grid
  Upscale,     // nearest-neighbour upscale of a grid of channel vectors by an integer factor
  Tanh,
  Relu,
};

// Shapes and types of each op in detail (ggml's conventions, ne[0] innermost):
//   GetRows   src0 [n, r, a, b] any to_float type, src1 I32 [m, a, b], dst F32 [n, m, a, b].
//   MulMat    src0 [k, n, a, b] weights, src1 F32 [k, m, A, B] with A % a == 0, B % b == 0,
//             dst F32 [n, m, A, B]; src0 rows must be contiguous (nb[0] = block bytes).
//   Add, Mul  src0/dst F32 of one shape, src1 F32 whose sizes divide src0's (ggml_can_repeat).
//   Scale, Silu, Gelu, GeluQuick, GeluErf, Tanh, Relu: src0/dst F32, same shape (Tanh: tanhf;
//             Relu: x > 0 ? x : 0, as ggml's). SwiGlu: src0, src1, dst F32, same shape.
//   RmsNorm, LayerNorm: src0/dst F32, per row of ne[0].
//   RmsNormMul src0/dst F32 of one shape, src1 F32 whose sizes divide src0's (repeated as Mul's
//             src1); params.eps as RmsNorm's. Each value is rounded twice, as RmsNorm's result
//             and then Mul's: the bits of Mul(RmsNorm(src0), src1).
//   Rope      src0/dst F32 [head_dim, n_head, n_tokens, b]; src1 I32 [n_tokens]; src2 F32
//             [>= n_dims / 2] frequency factors (optional). params.rope.n_dims even, <= head_dim.
//   SoftMax   src0/dst F32 [n, rows, a, b]; src1 mask F32/F16 [n, >= rows, a' | a, b' | b].
//   Cpy       F32/F16/BF16 -> F32/F16/BF16: any shapes of one element count, row-major order.
//             F32 -> a quantized type with a from_float (Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL,
//             K-quants; for KV caches) and quantized -> F32: one shape, F32 rows contiguous.
//   Concat    src0, src1, dst F32/F16/BF16 of equal sizes except along params.axis.
//   ArgMax    src0 F32 [n, r1, r2, r3], dst I32 [r1 * r2 * r3] (first index of the maximum).
//   Attention see the OpKind comment; K any type with a vec_dot, V F32/F16 (flash: any to_float).
//   SetRows   src0 F32 [n, m, a, b] (contiguous rows), src1 I32 [m, a, b], dst [n, r, a, b] of any
//             type with a from_float (F32, F16, BF16, quantized), contiguous rows; an id outside
//             [0, r) writes nothing. dst is memory written into (Graph::set_rows: the KV cache).
//   AvgPool2d src0 F32 [c, w, h, b] (a w x h grid of c-channel vectors, x along dim 1), dst F32
//             [c, w / k, h / k, b] with k = params.pool (w and h multiples of k): stride k, no
//             padding.
//   Im2Col1d  src0 F32 [L, C, b, 1] (C channels of L samples), dst F16 [C * k, L_out, b, 1] with
//             k = params.conv.kernel, L_out = (L + 2 p - d (k - 1) - 1) / s + 1 (s, p, d: stride,
//             padding, dilation of params.conv): dst[c * k + j, o, n] = src0[o s + j d - p, c, n],
//             0 outside [0, L). MulMat(dst, kernel [C * k, C_out]) is then the convolution
//             [L_out, C_out, b] (ggml_conv_1d).
//   Im2Col2d  src0 F32 [C, W, H, b] (a W x H grid of C-channel vectors, x along dim 1), dst F32
//             [C * kh * kw, W_out, H_out, b] with kw, kh = params.conv2d.kernel[0], [1] and each output
//             size as Conv1dParams::out_len per axis: dst[(c * kh + j) * kw + i, ox, oy, n] =
//             src0[c, ox sx + i dx - px, oy sy + j dy - py, n], 0 outside the grid. The column order
//             is a PyTorch conv weight's [C_out, C, kh, kw] flattened (ggml ne [kw, kh, C, C_out]):
//             MulMat(weight reshaped [C * kh * kw, C_out], dst) is the convolution [C_out, W_out,
//             H_out, b] (ggml_conv_2d: an F16 weight rounds the columns to F16 as ggml's F16 im2col).
//   GroupNorm src0/dst F32 [C, W, H, b] of one shape: channels split into params.groups groups of
//             ceil(C / groups) (the last one shorter, as ggml_group_norm), each group of each item
//             normalized over its channels and the whole grid: mean and variance summed in double,
//             dst = (x - mean) * (1 / sqrtf(var + params.eps)) in float.
//   Upscale   src0 F32 [C, W, H, b], dst F32 [C, W f, H f, b] with f = params.scale_factor:
//             dst[:, x, y, n] = src0[:, x / f, y / f, n] (ggml_upscale, GGML_SCALE_MODE_NEAREST).
// Every op runs in place when dst is exactly src0 (same data and strides), except MulMat,
// GetRows, Concat, ArgMax, Attention, AvgPool2d, SetRows, Im2Col1d, Im2Col2d and Upscale. Kernels that see
// bad data (a row id out of range) never read out of bounds: they write NaN rows (GetRows).

// Arithmetic of Attention. Both agree within float tolerance; each matches one llama.cpp setting.
enum class AttentionPath : uint8_t {
  // KQ = k.q (q converted to K's vec_dot_type as mul_mat converts activations), softmax in F32
  // with max subtraction, then KQ.v (probabilities rounded to F16 for an F16 V, as mul_mat(v, kq)
  // converts them). ref: llama.cpp with `-fa off`.
  Plain = 0,
  // Online softmax over keys, Q rounded to the K type (F16), V accumulated in F16 for an F16 V
  // and in F32 otherwise, as ggml_compute_forward_flash_attn_ext_f16's one-chunk path does.
  // ref: llama.cpp with `-fa on`.
  Flash = 1,
};

const char* op_name(OpKind k);

enum class RopeMode : int32_t { Normal = 0, Neox = 2 };  // values as ggml's mode argument

struct RopeParams {
  int32_t n_dims = 0;  // rotated dimensions (<= head size)
  RopeMode mode = RopeMode::Normal;
  int32_t n_ctx_orig = 0;
  float freq_base = 10000.0f;
  float freq_scale = 1.0f;
  float ext_factor = 0.0f;  // YaRN
  float attn_factor = 1.0f;
  float beta_fast = 32.0f;
  float beta_slow = 1.0f;
};

// Im2Col1d: a 1-D convolution's window.
struct Conv1dParams {
  int32_t kernel = 1;  // taps (k)
  int32_t stride = 1;
  int32_t padding = 0;  // zeros on each side
  int32_t dilation = 1;
  // Output length for an input of `len` samples (<= 0 when the window does not fit).
  int64_t out_len(int64_t len) const {
    return (len + 2 * int64_t{padding} - int64_t{dilation} * (kernel - 1) - 1) / stride + 1;
  }
};

// Im2Col2d: a 2-D convolution's window; index 0 is x (width, dim 1), index 1 is y (height, dim 2).
struct Conv2dParams {
  int32_t kernel[2] = {1, 1};
  int32_t stride[2] = {1, 1};
  int32_t padding[2] = {0, 0};  // zeros on each side
  int32_t dilation[2] = {1, 1};
  // Output size along `axis` for an input of `size` (<= 0 when the window does not fit).
  int64_t out_size(int axis, int64_t size) const {
    return Conv1dParams{kernel[axis], stride[axis], padding[axis], dilation[axis]}.out_len(size);
  }
};

struct OpParams {
  float eps = 0.0f;          // RmsNorm, LayerNorm, RmsNormMul
  float scale = 1.0f;        // Scale, SoftMax, Attention
  float max_bias = 0.0f;     // SoftMax (ALiBi), 0 = none
  int32_t axis = 0;          // Concat
  int32_t pool = 0;          // AvgPool2d: window side (and stride)
  RopeParams rope;           // Rope
  Conv1dParams conv;         // Im2Col1d
  Conv2dParams conv2d;       // Im2Col2d
  int32_t groups = 0;        // GroupNorm (eps as the norms')
  int32_t scale_factor = 0;  // Upscale
  // Attention without a mask tensor: query i sees keys j <= q_pos0 + i when causal.
  bool causal = true;
  int32_t q_pos0 = 0;
  AttentionPath attn_path = AttentionPath::Plain;  // Attention
  // MulMat, Attention: every activation / query row is computed in the float order it would have
  // in a batch of that one row, whatever the batch size (kernels that change order with the
  // number of rows fall back to their one-row order). Speculative verification relies on it: a
  // verified row must give the bits of the same token decoded alone.
  bool single_row_order = false;
};

struct OpCall {
  OpKind kind = OpKind::Add;
  TensorView dst;
  TensorView src[4];
  int n_src = 0;
  OpParams params;
};

struct KernelPlan {
  int n_phases = 1;
  int64_t units[2] = {0, 0};  // independent work units per phase
  size_t scratch_bytes = 0;   // shared by all threads of this call, valid across its phases
};

// run_kernel's scratch must be aligned to this many bytes.
inline constexpr size_t kScratchAlign = 64;

// Whether this op/type/shape combination has a kernel. The graph builder checks this up front.
bool kernel_supported(const OpCall& call);
// The same check with the reason when unsupported: "[op] what: numbers".
Status check_kernel(const OpCall& call);
// Requires kernel_supported(call) (asserted).
KernelPlan plan_kernel(const OpCall& call);
// Computes units [begin, end) of `phase`. Thread-safe for disjoint ranges of the same phase.
void run_kernel(const OpCall& call, int phase, int64_t begin, int64_t end, void* scratch);

}  // namespace kiln
