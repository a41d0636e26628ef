// Im2Col1d: the columns of a 1-D convolution, as F16 (ops/op.h has the shapes). One work unit is
// one output position of one batch item (a dst row of C * k values); any src0 strides, dst rows
// contiguous or not.
// ref: ggml_compute_forward_im2col_f16 (ggml-cpu/ops.cpp) with is_2D false: each value rounded
// F32 -> F16 as GGML_CPU_FP32_TO_FP16, zeros outside the input.
#include <cstdint>

#include "ops/kernel.h"

namespace kiln::ops {
namespace {

Status check_im2col_1d(const OpCall& call) {
  KILN_TRY(check_arity(call, 1, 1));
  KILN_TRY(check_type(call, call.src[0], DType::F32, "src0"));
  KILN_TRY(check_type(call, call.dst, DType::F16, "dst"));
  const Conv1dParams& c = call.params.conv;
  const TensorView& s = call.src[0];
  const TensorView& d = call.dst;
  if (c.kernel < 1 || c.stride < 1 || c.dilation < 1 || c.padding < 0) {
    return make_error("[im2col_1d] kernel ", c.kernel, ", stride ", c.stride, ", padding ", c.padding,
                      ", dilation ", c.dilation, ": kernel, stride and dilation must be positive, padding not negative");
  }
  const int64_t out_len = c.out_len(s.ne[0]);
  if (out_len < 1) {
    return make_error("[im2col_1d] a window of ", c.kernel, " taps (dilation ", c.dilation, ", padding ", c.padding,
                      ") does not fit src0 ", describe(s));
  }
  if (s.ne[3] != 1 || d.ne[0] != s.ne[1] * c.kernel || d.ne[1] != out_len || d.ne[2] != s.ne[2] || d.ne[3] != 1) {
    return make_error("[im2col_1d] dst ", describe(d), " is not [", s.ne[1] * c.kernel, ", ", out_len, ", ", s.ne[2],
                      ", 1] for src0 ", describe(s), " and a kernel of ", c.kernel);
  }
  return ok_status();
}

KernelPlan plan_im2col_1d(const OpCall& call) {
  KernelPlan p;
  p.units[0] = call.dst.ne[1] * call.dst.ne[2];
  return p;
}

void run_im2col_1d(const OpCall& call, int, int64_t begin, int64_t end, void*) {
  const TensorView& s = call.src[0];
  const TensorView& d = call.dst;
  const Conv1dParams& c = call.params.conv;
  const int64_t len = s.ne[0], channels = s.ne[1];
  for (int64_t r = begin; r < end; ++r) {
    const int64_t o = r % d.ne[1], n = r / d.ne[1];
    char* drow = row_ptr(d, o, n, 0);
    for (int64_t ch = 0; ch < channels; ++ch) {
      char* srow = row_ptr(s, ch, n, 0);
      for (int64_t j = 0; j < c.kernel; ++j) {
        const int64_t i = o * c.stride + j * c.dilation - c.padding;
        const float v = i >= 0 && i < len ? elem<float>(s, srow, i) : 0.0f;
        elem<uint16_t>(d, drow, ch * c.kernel + j) = f32_to_f16(v);
      }
    }
  }
}

}  // namespace

const KernelFns kIm2Col1dKernel{check_im2col_1d, plan_im2col_1d, run_im2col_1d};

}  // namespace kiln::ops
