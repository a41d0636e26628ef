// Im2Col1d and Im2Col2d: the columns of a 1-D and a 2-D convolution (ops/op.h has the shapes). One
// work unit is one output position of one batch item (a dst row); any src0 strides, dst rows
// contiguous or not.
// ref: ggml_compute_forward_im2col_f16 (ggml-cpu/ops.cpp) with is_2D false: each value rounded
// F32 -> F16 as GGML_CPU_FP32_TO_FP16, zeros outside the input. Im2Col2d copies F32 values
// (ggml_compute_forward_im2col_f32's order of columns); the matrix product that follows rounds
// them to an F16 weight's type as ggml's F16 im2col would have.
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
                      ", dilation ", c.dilation,
                      ": kernel, stride and dilation must be positive, padding not negative");
  }
  const int64_t out_len = c.out_len(s.ne[0]);
  if (out_len < 1) {
    return make_error("[im2col_1d] a window of ", c.kernel, " taps (dilation ", c.dilation, ", padding ",
                      c.padding, ") does not fit src0 ", describe(s));
  }
  if (s.ne[3] != 1 || d.ne[0] != s.ne[1] * c.kernel || d.ne[1] != out_len || d.ne[2] != s.ne[2] ||
      d.ne[3] != 1) {
    return make_error("[im2col_1d] dst ", describe(d), " is not [", s.ne[1] * c.kernel, ", ", out_len, ", ",
                      s.ne[2], ", 1] for src0 ", describe(s), " and a kernel of ", c.kernel);
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

Status check_im2col_2d(const OpCall& call) {
  KILN_TRY(check_arity(call, 1, 1));
  KILN_TRY(check_type(call, call.src[0], DType::F32, "src0"));
  KILN_TRY(check_type(call, call.dst, DType::F32, "dst"));
  const Conv2dParams& c = call.params.conv2d;
  const TensorView& s = call.src[0];
  const TensorView& d = call.dst;
  for (int a = 0; a < 2; ++a) {
    if (c.kernel[a] < 1 || c.stride[a] < 1 || c.dilation[a] < 1 || c.padding[a] < 0) {
      return make_error("[im2col_2d] ", a == 0 ? "x" : "y", ": kernel ", c.kernel[a], ", stride ",
                        c.stride[a], ", padding ", c.padding[a], ", dilation ", c.dilation[a],
                        ": kernel, stride and dilation must be positive, padding not negative");
    }
    if (c.out_size(a, s.ne[1 + a]) < 1) {
      return make_error("[im2col_2d] a ", c.kernel[0], " x ", c.kernel[1], " window (dilation ",
                        c.dilation[0], " x ", c.dilation[1], ", padding ", c.padding[0], " x ", c.padding[1],
                        ") does not fit src0 ", describe(s));
    }
  }
  const int64_t cols = s.ne[0] * c.kernel[0] * c.kernel[1];
  if (d.ne[0] != cols || d.ne[1] != c.out_size(0, s.ne[1]) || d.ne[2] != c.out_size(1, s.ne[2]) ||
      d.ne[3] != s.ne[3]) {
    return make_error("[im2col_2d] dst ", describe(d), " is not [", cols, ", ", c.out_size(0, s.ne[1]), ", ",
                      c.out_size(1, s.ne[2]), ", ", s.ne[3], "] for src0 ", describe(s), " and a ",
                      c.kernel[0], " x ", c.kernel[1], " kernel");
  }
  return ok_status();
}

KernelPlan plan_im2col_2d(const OpCall& call) {
  KernelPlan p;
  p.units[0] = call.dst.nrows();
  return p;
}

void run_im2col_2d(const OpCall& call, int, int64_t begin, int64_t end, void*) {
  const TensorView& s = call.src[0];
  const TensorView& d = call.dst;
  const Conv2dParams& c = call.params.conv2d;
  const int64_t channels = s.ne[0], kw = c.kernel[0], kh = c.kernel[1];
  for (int64_t r = begin; r < end; ++r) {
    const RowIdx o = row_idx(d, r);  // (ox, oy, n)
    char* drow = row_ptr(d, o);
    for (int64_t j = 0; j < kh; ++j) {
      const int64_t y = o.i2 * c.stride[1] + j * c.dilation[1] - c.padding[1];
      for (int64_t i = 0; i < kw; ++i) {
        const int64_t x = o.i1 * c.stride[0] + i * c.dilation[0] - c.padding[0];
        const bool inside = x >= 0 && x < s.ne[1] && y >= 0 && y < s.ne[2];
        char* srow = inside ? row_ptr(s, x, y, o.i3) : nullptr;
        for (int64_t ch = 0; ch < channels; ++ch) {
          elem<float>(d, drow, (ch * kh + j) * kw + i) = inside ? elem<float>(s, srow, ch) : 0.0f;
        }
      }
    }
  }
}

}  // namespace

const KernelFns kIm2Col1dKernel{check_im2col_1d, plan_im2col_1d, run_im2col_1d};
const KernelFns kIm2Col2dKernel{check_im2col_2d, plan_im2col_2d, run_im2col_2d};

}  // namespace kiln::ops
