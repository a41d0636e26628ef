// Rope's per-call angle constants, shared by the CPU kernel (ops/rope.cpp) and device backends
// that compute rope in shaders, so that both start from the same floats. Thread-safe (pure).
#pragma once

#include "ops/op.h"

namespace kiln::ops {

struct RopeAngles {
  float theta_scale = 1.0f;  // powf(freq_base, -2 / n_dims): theta's factor from one pair to the next
  float corr_dims[2] = {0.0f, 0.0f};  // YaRN's ramp: first and last corrected pair
};

// ref: ggml_rope_cache_init's theta_scale and ggml_rope_yarn_corr_dims.
RopeAngles rope_angles(const RopeParams& rp);

}  // namespace kiln::ops
