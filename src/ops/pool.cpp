// AvgPool2d: the mean of each k x k window of a grid of channel vectors, stride k, no padding.
// src0 [c, w, h, b] holds a w x h grid (x along dim 1, y along dim 2) of c channels; dst
// [c, w / k, h / k, b]. One work unit is one output grid cell; any strides.
// ref: ggml_compute_forward_pool_2d (GGML_OP_POOL_AVG) over the transposed layout [w, h, c]: per
// channel a float sum from 0, window rows (ky) outer and columns (kx) inner, then divided by k * k.
#include <cstdint>

#include "ops/kernel.h"

namespace kiln::ops {
namespace {

Status check_avg_pool(const OpCall& call) {
  KILN_TRY(check_arity(call, 1, 1));
  KILN_TRY(check_type(call, call.src[0], DType::F32, "src0"));
  KILN_TRY(check_type(call, call.dst, DType::F32, "dst"));
  const TensorView& s = call.src[0];
  const TensorView& d = call.dst;
  const int64_t k = call.params.pool;
  if (k < 1 || s.ne[1] % k != 0 || s.ne[2] % k != 0) {
    return make_error("[avg_pool_2d] window ", k, " does not tile the ", s.ne[1], " x ", s.ne[2], " grid of src0 ",
                      describe(s));
  }
  if (d.ne[0] != s.ne[0] || d.ne[1] != s.ne[1] / k || d.ne[2] != s.ne[2] / k || d.ne[3] != s.ne[3]) {
    return make_error("[avg_pool_2d] dst ", describe(d), " is not src0 ", describe(s), " pooled by ", k);
  }
  return ok_status();
}

KernelPlan plan_avg_pool(const OpCall& call) {
  KernelPlan p;
  p.units[0] = call.dst.nrows();
  return p;
}

void run_avg_pool(const OpCall& call, int, int64_t begin, int64_t end, void*) {
  const TensorView& s = call.src[0];
  const TensorView& d = call.dst;
  const int k = call.params.pool;
  const float area = static_cast<float>(k * k);
  for (int64_t r = begin; r < end; ++r) {
    const RowIdx o = row_idx(d, r);  // (ox, oy, batch)
    char* drow = row_ptr(d, o);
    for (int64_t c = 0; c < d.ne[0]; ++c) {
      float sum = 0.0f;
      for (int ky = 0; ky < k; ++ky) {
        for (int kx = 0; kx < k; ++kx) {
          sum += elem<float>(s, row_ptr(s, o.i1 * k + kx, o.i2 * k + ky, o.i3), c);
        }
      }
      elem<float>(d, drow, c) = sum / area;
    }
  }
}

}  // namespace

const KernelFns kAvgPool2dKernel{check_avg_pool, plan_avg_pool, run_avg_pool};

}  // namespace kiln::ops
