// Rope: rotary position embedding, normal (adjacent pairs) and neox (halves) modes, with YaRN and
// per-dimension frequency factors. ref: ggml_compute_forward_rope_flt, ggml_rope_cache_init,
// rope_yarn, rope_yarn_ramp and ggml_rope_yarn_corr_dims (ggml-cpu/ops.cpp, ggml.c).
//
// Angles exactly as ggml: theta starts at the position (as float) and is multiplied by
// theta_scale = powf(freq_base, -2 / n_dims) once per pair of dimensions (never powf per
// dimension); each pair divides by its frequency factor, YaRN mixes the interpolated and
// extrapolated angles, and cos/sin are scaled by attn_factor (times YaRN's magnitude correction).
// One work unit is one (token, batch) plane of all heads; its cos/sin cache lives in scratch
// (ne[0] floats per unit, n_dims used), so disjoint ranges never share a cache.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numbers>

#include "ops/kernel.h"
#include "ops/rope_angles.h"

namespace kiln::ops {
namespace {

Status check_rope(const OpCall& call) {
  KILN_TRY(check_arity(call, 2, 3));
  const TensorView& s = call.src[0];
  const TensorView& pos = call.src[1];
  const RopeParams& rp = call.params.rope;
  KILN_TRY(check_type(call, s, DType::F32, "src0"));
  KILN_TRY(check_type(call, call.dst, DType::F32, "dst"));
  KILN_TRY(check_type(call, pos, DType::I32, "src1 (positions)"));
  if (!same_shape(s, call.dst)) {
    return make_error("[rope] src0 ", describe(s), " and dst ", describe(call.dst), " differ in shape");
  }
  if (pos.ne[0] != s.ne[2] || pos.nrows() != 1) {
    return make_error("[rope] positions ", describe(pos), " must be [", s.ne[2], "] for src0 ", describe(s));
  }
  if (rp.n_dims <= 0 || rp.n_dims % 2 != 0 || rp.n_dims > s.ne[0] || s.ne[0] % 2 != 0) {
    return make_error("[rope] n_dims = ", rp.n_dims,
                      " must be even, positive and at most the even head size ", s.ne[0]);
  }
  if (rp.mode != RopeMode::Normal && rp.mode != RopeMode::Neox) {
    return make_error("[rope] mode ", static_cast<int>(rp.mode), " is not normal (0) or neox (2)");
  }
  if (call.n_src == 3) {
    const TensorView& ff = call.src[2];
    KILN_TRY(check_type(call, ff, DType::F32, "src2 (frequency factors)"));
    if (ff.ne[0] < rp.n_dims / 2) {
      return make_error("[rope] frequency factors ", describe(ff), " need at least ", rp.n_dims / 2,
                        " values");
    }
  }
  return ok_status();
}

KernelPlan plan_rope(const OpCall& call) {
  KernelPlan p;
  p.units[0] = call.src[0].ne[2] * call.src[0].ne[3];
  p.scratch_bytes = static_cast<size_t>(p.units[0] * call.src[0].ne[0]) * sizeof(float);
  return p;
}

// ref: rope_yarn_ramp (i0 / 2 is integer division).
float yarn_ramp(float low, float high, int64_t i0) {
  const float y = (static_cast<float>(i0 / 2) - low) / std::max(0.001f, high - low);
  return 1.0f - std::min(1.0f, std::max(0.0f, y));
}

void run_rope(const OpCall& call, int, int64_t begin, int64_t end, void* scratch) {
  const TensorView& s = call.src[0];
  const TensorView& d = call.dst;
  const TensorView& pos = call.src[1];
  const RopeParams& rp = call.params.rope;
  const float* freq_factors = call.n_src == 3 ? static_cast<const float*>(call.src[2].data) : nullptr;
  const int64_t ff_stride = call.n_src == 3 ? static_cast<int64_t>(call.src[2].nb[0] / sizeof(float)) : 0;
  const int64_t ne0 = s.ne[0];
  const int n_dims = rp.n_dims;
  const RopeAngles angles = rope_angles(rp);
  const float theta_scale = angles.theta_scale;
  const float* corr_dims = angles.corr_dims;
  const bool neox = rp.mode == RopeMode::Neox;
  for (int64_t u = begin; u < end; ++u) {
    const int64_t i2 = u % s.ne[2];
    const int64_t i3 = u / s.ne[2];
    float* cache = static_cast<float*>(scratch) + u * ne0;
    // ref: ggml_rope_cache_init + rope_yarn, over the rotated n_dims only (ggml fills ne0, but
    // the entries past n_dims are never used and the frequency factors have n_dims / 2 values).
    const int32_t p = elem<int32_t>(pos, static_cast<char*>(pos.data), i2);
    float theta = static_cast<float>(p);
    for (int64_t i0 = 0; i0 < n_dims; i0 += 2) {
      const float ff = freq_factors ? freq_factors[(i0 / 2) * ff_stride] : 1.0f;
      const float theta_extrap = theta / ff;
      const float theta_interp = rp.freq_scale * theta_extrap;
      float th = theta_interp;
      float mscale = rp.attn_factor;
      if (rp.ext_factor != 0.0f) {
        const float ramp_mix = yarn_ramp(corr_dims[0], corr_dims[1], i0) * rp.ext_factor;
        th = theta_interp * (1 - ramp_mix) + theta_extrap * ramp_mix;
        mscale *= 1.0f + 0.1f * std::log(1.0f / rp.freq_scale);
      }
      cache[i0 + 0] = std::cos(th) * mscale;
      cache[i0 + 1] = std::sin(th) * mscale;
      theta *= theta_scale;
    }
    // Normal mode rotates (i0, i0 + 1); neox rotates (i0 / 2, i0 / 2 + n_dims / 2), both with the
    // angle of pair i0 / 2. Dimensions past n_dims are copied.
    const int64_t offset = neox ? n_dims / 2 : 1;
    for (int64_t i1 = 0; i1 < s.ne[1]; ++i1) {
      char* x = row_ptr(s, i1, i2, i3);
      char* y = row_ptr(d, i1, i2, i3);
      for (int64_t i0 = 0; i0 < n_dims; i0 += 2) {
        const int64_t ic = neox ? i0 / 2 : i0;
        const float cos_t = cache[i0 + 0];
        const float sin_t = cache[i0 + 1];
        const float x0 = elem<float>(s, x, ic);
        const float x1 = elem<float>(s, x, ic + offset);
        elem<float>(d, y, ic) = x0 * cos_t - x1 * sin_t;
        elem<float>(d, y, ic + offset) = x0 * sin_t + x1 * cos_t;
      }
      for (int64_t i0 = n_dims; i0 < ne0; ++i0) elem<float>(d, y, i0) = elem<float>(s, x, i0);
    }
  }
}

}  // namespace

RopeAngles rope_angles(const RopeParams& rp) {
  // ref: ggml_rope_yarn_corr_dim / ggml_rope_yarn_corr_dims.
  auto corr_dim = [&](float n_rot) {
    return static_cast<float>(rp.n_dims) *
           std::log(static_cast<float>(rp.n_ctx_orig) / (n_rot * 2.0f * std::numbers::pi_v<float>)) /
           (2.0f * std::log(rp.freq_base));
  };
  RopeAngles a;
  a.theta_scale = std::pow(rp.freq_base, -2.0f / static_cast<float>(rp.n_dims));
  a.corr_dims[0] = std::max(0.0f, std::floor(corr_dim(rp.beta_fast)));
  a.corr_dims[1] = std::min(static_cast<float>(rp.n_dims - 1), std::ceil(corr_dim(rp.beta_slow)));
  return a;
}

const KernelFns kRopeKernel{check_rope, plan_rope, run_rope};

}  // namespace kiln::ops
