// SoftMax: per row of ne[0], softmax(x * scale + slope * mask) with ALiBi slopes when max_bias > 0.
// ref: ggml_compute_forward_soft_max_f32 (ggml-cpu/ops.cpp); the normalization is
// softmax_in_place (ops/softmax_row.h). The mask (F32 or F16) broadcasts like ggml's: mask row i1,
// mask plane i2 % ne[2], i3 % ne[3].
// One work unit is one row; any strides; dst may alias src0 exactly (dst is the workspace).
#include <cmath>
#include <cstdint>

#include "ops/kernel.h"
#include "ops/softmax_row.h"

namespace kiln::ops {
namespace {

Status check_softmax(const OpCall& call) {
  KILN_TRY(check_arity(call, 1, 2));
  const TensorView& s = call.src[0];
  KILN_TRY(check_type(call, s, DType::F32, "src0"));
  KILN_TRY(check_type(call, call.dst, DType::F32, "dst"));
  if (!same_shape(s, call.dst)) {
    return make_error("[soft_max] src0 ", describe(s), " and dst ", describe(call.dst), " differ in shape");
  }
  if (call.n_src == 2) {
    const TensorView& m = call.src[1];
    if (m.type != DType::F32 && m.type != DType::F16) {
      return make_error("[soft_max] mask ", describe(m), " must be f32 or f16");
    }
    if (m.ne[0] != s.ne[0] || m.ne[1] < s.ne[1] || s.ne[2] % m.ne[2] != 0 || s.ne[3] % m.ne[3] != 0) {
      return make_error("[soft_max] mask ", describe(m), " does not cover src0 ", describe(s));
    }
  }
  return ok_status();
}

KernelPlan plan_softmax(const OpCall& call) {
  KernelPlan p;
  p.units[0] = call.dst.nrows();
  return p;
}

void run_softmax(const OpCall& call, int, int64_t begin, int64_t end, void*) {
  const TensorView& s = call.src[0];
  const TensorView& d = call.dst;
  const TensorView* mask = call.n_src == 2 ? &call.src[1] : nullptr;
  const int64_t n = s.ne[0];
  const float scale = call.params.scale;
  const AlibiSlopes slopes(call.params.max_bias, static_cast<uint32_t>(s.ne[2]));
  for (int64_t r = begin; r < end; ++r) {
    const RowIdx ri = row_idx(d, r);
    char* x = row_ptr(s, ri);
    char* y = row_ptr(d, ri);
    const float slope = slopes(static_cast<uint32_t>(ri.i2));
    const char* mrow = mask ? row_ptr(*mask, ri.i1, ri.i2 % mask->ne[2], ri.i3 % mask->ne[3]) : nullptr;
    for (int64_t i = 0; i < n; ++i) {
      float w = elem<float>(s, x, i) * scale;
      if (mrow) w += slope * load_f32(mask->type, mrow + i * static_cast<int64_t>(mask->nb[0]));
      elem<float>(d, y, i) = w;
    }
    softmax_in_place(n, [&](int64_t i) -> float& { return elem<float>(d, y, i); });
  }
}

}  // namespace

const KernelFns kSoftMaxKernel{check_softmax, plan_softmax, run_softmax};

}  // namespace kiln::ops
