// Upscale: nearest-neighbour upscale of a grid of channel vectors by an integer factor (ops/op.h
// has the shapes). One work unit is one dst row (one grid cell of one batch item), a copy of the
// source cell it falls in.
// ref: ggml_compute_forward_upscale_f32 (ggml-cpu/ops.cpp) with GGML_SCALE_MODE_NEAREST: source
// index = (int)(i / sf) with sf = dst size / src size, which is i / f for an integer factor f.
#include <cstdint>

#include "ops/kernel.h"

namespace kiln::ops {
namespace {

Status check_upscale(const OpCall& call) {
  KILN_TRY(check_arity(call, 1, 1));
  KILN_TRY(check_type(call, call.src[0], DType::F32, "src0"));
  KILN_TRY(check_type(call, call.dst, DType::F32, "dst"));
  const int64_t f = call.params.scale_factor;
  const TensorView& s = call.src[0];
  const TensorView& d = call.dst;
  if (f < 1) return make_error("[upscale] scale factor ", f, " is not positive");
  if (d.ne[0] != s.ne[0] || d.ne[1] != s.ne[1] * f || d.ne[2] != s.ne[2] * f || d.ne[3] != s.ne[3]) {
    return make_error("[upscale] dst ", describe(d), " is not src0 ", describe(s),
                      " with dims 1 and 2 times ", f);
  }
  return ok_status();
}

KernelPlan plan_upscale(const OpCall& call) {
  KernelPlan p;
  p.units[0] = call.dst.nrows();
  return p;
}

void run_upscale(const OpCall& call, int, int64_t begin, int64_t end, void*) {
  const TensorView& s = call.src[0];
  const TensorView& d = call.dst;
  const int64_t f = call.params.scale_factor;
  for (int64_t r = begin; r < end; ++r) {
    const RowIdx o = row_idx(d, r);
    char* drow = row_ptr(d, o);
    char* srow = row_ptr(s, o.i1 / f, o.i2 / f, o.i3);
    for (int64_t c = 0; c < s.ne[0]; ++c) elem<float>(d, drow, c) = elem<float>(s, srow, c);
  }
}

}  // namespace

const KernelFns kUpscaleKernel{check_upscale, plan_upscale, run_upscale};

}  // namespace kiln::ops
