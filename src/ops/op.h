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
  SwiGlu,     // dst = silu(src0) * src1
  Cpy,        // dst = src0 converted to dst.type (F32/F16/BF16/quantized), any strides
  Concat,     // along params.axis
  ArgMax,     // per row -> I32
  Attention,  // softmax(q k^T * scale + mask) v; src0 q [d, n_q, h], src1 k / src2 v [d, n_kv, h_kv]
              // (views over a KV cache, F32 or F16), src3 (optional) F32 mask [n_kv, n_q]
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

struct OpParams {
  float eps = 0.0f;        // RmsNorm, LayerNorm
  float scale = 1.0f;      // Scale, SoftMax, Attention
  float max_bias = 0.0f;   // SoftMax (ALiBi), 0 = none
  int32_t axis = 0;        // Concat
  RopeParams rope;         // Rope
  // Attention without a mask tensor: query i sees keys j <= q_pos0 + i when causal.
  bool causal = true;
  int32_t q_pos0 = 0;
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

// Whether this op/type/shape combination has a kernel. The graph builder checks this up front.
bool kernel_supported(const OpCall& call);
KernelPlan plan_kernel(const OpCall& call);
// Computes units [begin, end) of `phase`. Thread-safe for disjoint ranges of the same phase.
void run_kernel(const OpCall& call, int phase, int64_t begin, int64_t end, void* scratch);

}  // namespace kiln
