// RmsNorm and LayerNorm over rows of ne[0] F32 values, and RmsNormMul: RmsNorm's row multiplied
// by a weight in the same pass, with the bits of RmsNorm followed by Mul.
// One work unit is one row; any strides. dst may alias src0 exactly (in place).
#include <cmath>
#include <cstdint>

#include "ops/kernel.h"

namespace kiln::ops {
namespace {

Status check_eps(const OpCall& call) {
  if (!(call.params.eps >= 0.0f))
    return make_error("[", op_name(call.kind), "] eps = ", call.params.eps, " is negative");
  return ok_status();
}

Status check_norm(const OpCall& call) {
  KILN_TRY(check_arity(call, 1, 1));
  KILN_TRY(check_type(call, call.src[0], DType::F32, "src0"));
  KILN_TRY(check_type(call, call.dst, DType::F32, "dst"));
  if (!same_shape(call.src[0], call.dst)) {
    return make_error("[", op_name(call.kind), "] src0 ", describe(call.src[0]), " and dst ",
                      describe(call.dst), " differ in shape");
  }
  return check_eps(call);
}

KernelPlan plan_norm(const OpCall& call) {
  KernelPlan p;
  p.units[0] = call.dst.nrows();
  return p;
}

// ref: ggml_compute_forward_rms_norm_f32: sum of (float) squares in double, mean rounded to float,
// scale = 1 / sqrtf(mean + eps) in float. The scale of one row `x` of view `s`.
float rms_scale(const TensorView& s, char* x, float eps) {
  const int64_t n = s.ne[0];
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    const float v = elem<float>(s, x, i);
    sum += static_cast<double>(v * v);
  }
  const float mean = static_cast<float>(sum / static_cast<double>(n));
  return 1.0f / std::sqrt(mean + eps);
}

// y = x * scale, rounded to float (ggml_vec_scale_f32).
void run_rms_norm(const OpCall& call, int, int64_t begin, int64_t end, void*) {
  const TensorView& s = call.src[0];
  const TensorView& d = call.dst;
  const int64_t n = s.ne[0];
  for (int64_t r = begin; r < end; ++r) {
    const RowIdx ri = row_idx(d, r);
    char* x = row_ptr(s, ri);
    char* y = row_ptr(d, ri);
    const float scale = rms_scale(s, x, call.params.eps);
    for (int64_t i = 0; i < n; ++i) elem<float>(d, y, i) = elem<float>(s, x, i) * scale;
  }
}

// RmsNormMul: src0 x, src1 w and dst as Mul's (w repeating over x), eps as RmsNorm's.
Status check_rms_norm_mul(const OpCall& call) {
  KILN_TRY(check_binary_broadcast(call));
  return check_eps(call);
}

// dst = rms_norm(x) * w with the two roundings of RmsNorm then Mul (ggml's fused
// ggml_compute_forward_rms_norm_f32 with a mul keeps them too): t = x * scale rounded to float,
// then t * w rounded to float. Multiplications only, so -ffp-contract cannot merge them. w's row
// is (i1 % w.ne1, i2 % w.ne2, i3 % w.ne3) and its element i0 % w.ne0, as Mul broadcasts.
void run_rms_norm_mul(const OpCall& call, int, int64_t begin, int64_t end, void*) {
  const TensorView& s = call.src[0];
  const TensorView& w = call.src[1];
  const TensorView& d = call.dst;
  const int64_t n = s.ne[0], nw = w.ne[0];
  const bool flat =
      s.nb[0] == sizeof(float) && w.nb[0] == sizeof(float) && d.nb[0] == sizeof(float) && nw == n;
  for (int64_t r = begin; r < end; ++r) {
    const RowIdx ri = row_idx(d, r);
    char* x = row_ptr(s, ri);
    char* wr = row_ptr(w, ri.i1 % w.ne[1], ri.i2 % w.ne[2], ri.i3 % w.ne[3]);
    char* y = row_ptr(d, ri);
    const float scale = rms_scale(s, x, call.params.eps);
    if (flat) {  // plain arrays, which the compiler vectorises (y may be x: in place)
      const float* xf = reinterpret_cast<const float*>(x);
      const float* wf = reinterpret_cast<const float*>(wr);
      float* yf = reinterpret_cast<float*>(y);
      for (int64_t i = 0; i < n; ++i) {
        const float t = xf[i] * scale;
        yf[i] = t * wf[i];
      }
      continue;
    }
    for (int64_t i = 0; i < n; ++i) {
      const float t = elem<float>(s, x, i) * scale;
      elem<float>(d, y, i) = t * elem<float>(w, wr, i % nw);
    }
  }
}

// ref: ggml_compute_forward_norm_f32 with ggml_vec_cvar_f32's scalar form: mean = (float)(sum x
// in double / n); y = x - mean; variance = (float)(sum of (float) y^2 in double / n);
// y *= 1 / sqrtf(variance + eps).
void run_layer_norm(const OpCall& call, int, int64_t begin, int64_t end, void*) {
  const TensorView& s = call.src[0];
  const TensorView& d = call.dst;
  const int64_t n = s.ne[0];
  for (int64_t r = begin; r < end; ++r) {
    const RowIdx ri = row_idx(d, r);
    char* x = row_ptr(s, ri);
    char* y = row_ptr(d, ri);
    double sum = 0.0;
    for (int64_t i = 0; i < n; ++i) sum += static_cast<double>(elem<float>(s, x, i));
    const float mean = static_cast<float>(sum / static_cast<double>(n));
    double sum2 = 0.0;
    for (int64_t i = 0; i < n; ++i) {
      const float v = elem<float>(s, x, i) - mean;
      elem<float>(d, y, i) = v;
      sum2 += static_cast<double>(v * v);
    }
    const float variance = static_cast<float>(sum2 / static_cast<double>(n));
    const float scale = 1.0f / std::sqrt(variance + call.params.eps);
    for (int64_t i = 0; i < n; ++i) elem<float>(d, y, i) *= scale;
  }
}

}  // namespace

const KernelFns kRmsNormKernel{check_norm, plan_norm, run_rms_norm};
const KernelFns kLayerNormKernel{check_norm, plan_norm, run_layer_norm};
const KernelFns kRmsNormMulKernel{check_rms_norm_mul, plan_norm, run_rms_norm_mul};

}  // namespace kiln::ops
