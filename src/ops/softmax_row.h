// The softmax arithmetic of ggml's CPU backend, shared by SoftMax and the plain Attention path.
#pragma once

#include <cmath>
#include <cstdint>

namespace kiln::ops {

// std::fmax's value without its libm call (GCC keeps the call unless NaNs are ruled out): a NaN
// argument gives the other one.
inline float fmax_of(float a, float b) {
  if (a != a) return b;
  return a > b || b != b ? a : b;
}

// Replaces logits w[0..n) (reached through at(i), a float&) by their softmax.
// ref: ggml_compute_forward_soft_max_f32 + ggml_vec_soft_max_f32: max, then e^(w - max) summed in
// double in index order, then each value times (float)(1 / sum). A row whose every logit is -inf
// becomes zeros (ggml would produce NaN).
template <class At>
void softmax_in_place(int64_t n, At&& at) {
  float max = -INFINITY;
  for (int64_t i = 0; i < n; ++i) max = fmax_of(max, at(i));
  if (max == -INFINITY) {
    for (int64_t i = 0; i < n; ++i) at(i) = 0.0f;
    return;
  }
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    const float e = std::exp(at(i) - max);
    sum += static_cast<double>(e);
    at(i) = e;
  }
  const float inv = static_cast<float>(1.0 / sum);
  for (int64_t i = 0; i < n; ++i) at(i) *= inv;
}

// ALiBi slope of each head. ref: the m0/m1 slopes of ggml_compute_forward_soft_max_f32 and
// flash_attn_ext (1 for every head when max_bias is 0).
class AlibiSlopes {
 public:
  AlibiSlopes(float max_bias, uint32_t n_head)
      : max_bias_(max_bias),
        n_head_log2_(1u << static_cast<uint32_t>(std::floor(std::log2(static_cast<double>(n_head))))),
        m0_(std::pow(2.0f, -max_bias / static_cast<float>(n_head_log2_))),
        m1_(std::pow(2.0f, -(max_bias / 2.0f) / static_cast<float>(n_head_log2_))) {}
  float operator()(uint32_t h) const {
    if (!(max_bias_ > 0.0f)) return 1.0f;
    return h < n_head_log2_ ? std::pow(m0_, static_cast<float>(h + 1))
                            : std::pow(m1_, static_cast<float>(2 * (h - n_head_log2_) + 1));
  }
  // The constants operator() computes from (for shaders that compute the slopes themselves).
  bool enabled() const { return max_bias_ > 0.0f; }
  uint32_t n_head_log2() const { return n_head_log2_; }
  float m0() const { return m0_; }
  float m1() const { return m1_; }

 private:
  float max_bias_;
  uint32_t n_head_log2_;
  float m0_, m1_;
};

}  // namespace kiln::ops
