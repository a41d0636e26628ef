// GroupNorm over a grid of channel vectors (ops/op.h has the shapes). One work unit is one group
// of one batch item: it reads and writes only that group's channels, so dst may be src0.
// ref: ggml_compute_forward_group_norm_f32 (ggml-cpu/ops.cpp): groups of ceil(C / groups) channels,
// the sum and the sum of squared deviations accumulated in double, the mean and the variance
// rounded to float, dst = (x - mean) * (1 / sqrtf(var + eps)). ggml adds rows of its [W, H, C]
// layout, kiln a group's channels of each cell: in double the order almost never shows in the
// float mean and variance.
#include <algorithm>
#include <cmath>
#include <cstdint>

#include "ops/kernel.h"

namespace kiln::ops {
namespace {

Status check_group_norm(const OpCall& call) {
  KILN_TRY(check_arity(call, 1, 1));
  KILN_TRY(check_type(call, call.src[0], DType::F32, "src0"));
  KILN_TRY(check_type(call, call.dst, DType::F32, "dst"));
  if (!same_shape(call.src[0], call.dst)) {
    return make_error("[group_norm] dst ", describe(call.dst), " is not the shape of src0 ",
                      describe(call.src[0]));
  }
  if (call.params.groups < 1 || call.params.groups > call.src[0].ne[0]) {
    return make_error("[group_norm] ", call.params.groups, " groups for ", call.src[0].ne[0],
                      " channels: need 1 to one per channel");
  }
  return ok_status();
}

int64_t channels_per_group(const OpCall& call) {
  return (call.src[0].ne[0] + call.params.groups - 1) / call.params.groups;
}

KernelPlan plan_group_norm(const OpCall& call) {
  KernelPlan p;
  // ceil(C / groups) channels per group can leave the last groups empty (ggml skips them too).
  const int64_t per = channels_per_group(call);
  p.units[0] = (call.src[0].ne[0] + per - 1) / per * call.src[0].ne[3];
  return p;
}

void run_group_norm(const OpCall& call, int, int64_t begin, int64_t end, void*) {
  const TensorView& s = call.src[0];
  const TensorView& d = call.dst;
  const int64_t per = channels_per_group(call);
  const int64_t n_groups = (s.ne[0] + per - 1) / per;
  const int64_t w = s.ne[1], h = s.ne[2];
  for (int64_t u = begin; u < end; ++u) {
    const int64_t g = u % n_groups, n = u / n_groups;
    const int64_t c0 = g * per, c1 = std::min(c0 + per, s.ne[0]);
    const double count = static_cast<double>((c1 - c0) * w * h);
    double sum = 0.0;
    for (int64_t y = 0; y < h; ++y) {
      for (int64_t x = 0; x < w; ++x) {
        char* srow = row_ptr(s, x, y, n);
        double row = 0.0;
        for (int64_t c = c0; c < c1; ++c) row += static_cast<double>(elem<float>(s, srow, c));
        sum += row;
      }
    }
    const float mean = static_cast<float>(sum / count);
    double sum2 = 0.0;
    for (int64_t y = 0; y < h; ++y) {
      for (int64_t x = 0; x < w; ++x) {
        char* srow = row_ptr(s, x, y, n);
        char* drow = row_ptr(d, x, y, n);
        double row = 0.0;
        for (int64_t c = c0; c < c1; ++c) {
          const float v = elem<float>(s, srow, c) - mean;
          elem<float>(d, drow, c) = v;
          row += static_cast<double>(v * v);
        }
        sum2 += row;
      }
    }
    const float variance = static_cast<float>(sum2 / count);
    const float scale = 1.0f / std::sqrt(variance + call.params.eps);
    for (int64_t y = 0; y < h; ++y) {
      for (int64_t x = 0; x < w; ++x) {
        char* drow = row_ptr(d, x, y, n);
        for (int64_t c = c0; c < c1; ++c) elem<float>(d, drow, c) *= scale;
      }
    }
  }
}

}  // namespace

const KernelFns kGroupNormKernel{check_group_norm, plan_group_norm, run_group_norm};

}  // namespace kiln::ops
