// RmsNorm and LayerNorm over rows of ne[0] F32 values (no weight: the graph multiplies after).
// One work unit is one row; any strides. dst may alias src0 exactly (in place).
#include <cmath>
#include <cstdint>

#include "ops/kernel.h"

namespace kiln::ops {
namespace {

Status check_norm(const OpCall& call) {
  KILN_TRY(check_arity(call, 1, 1));
  KILN_TRY(check_type(call, call.src[0], DType::F32, "src0"));
  KILN_TRY(check_type(call, call.dst, DType::F32, "dst"));
  if (!same_shape(call.src[0], call.dst)) {
    return make_error("[", op_name(call.kind), "] src0 ", describe(call.src[0]), " and dst ",
                      describe(call.dst), " differ in shape");
  }
  if (!(call.params.eps >= 0.0f))
    return make_error("[", op_name(call.kind), "] eps = ", call.params.eps, " is negative");
  return ok_status();
}

KernelPlan plan_norm(const OpCall& call) {
  KernelPlan p;
  p.units[0] = call.dst.nrows();
  return p;
}

// ref: ggml_compute_forward_rms_norm_f32: sum of (float) squares in double, mean rounded to float,
// scale = 1 / sqrtf(mean + eps) in float, y = x * scale.
void run_rms_norm(const OpCall& call, int, int64_t begin, int64_t end, void*) {
  const TensorView& s = call.src[0];
  const TensorView& d = call.dst;
  const int64_t n = s.ne[0];
  for (int64_t r = begin; r < end; ++r) {
    const RowIdx ri = row_idx(d, r);
    char* x = row_ptr(s, ri);
    char* y = row_ptr(d, ri);
    double sum = 0.0;
    for (int64_t i = 0; i < n; ++i) {
      const float v = elem<float>(s, x, i);
      sum += static_cast<double>(v * v);
    }
    const float mean = static_cast<float>(sum / static_cast<double>(n));
    const float scale = 1.0f / std::sqrt(mean + call.params.eps);
    for (int64_t i = 0; i < n; ++i) elem<float>(d, y, i) = elem<float>(s, x, i) * scale;
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

}  // namespace kiln::ops
