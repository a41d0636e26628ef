// The scalar kernel of the Q6_K family (layouts.h): the oracle of the AVX2 kernel, one output at a
// time in the order of ggml's AVX2 ggml_vec_dot_q6_K_q8_K (quant.h's vec_dot_q6_K_q8_K_avx2).
#include <cmath>

#include "core/half.h"
#include "ops/gemm/layouts.h"

namespace kiln::gemm {
namespace {

// Level e (0..255, stored value 0..63, biased by 32) of a Q6_K super-block: in each half of 128,
// values 32c .. 32c+31 take the low (c < 2) or high nibbles of ql[32 (c % 2) ..] and bits 2c, 2c+1
// of qh.
int q6_K_level(const quant::BlockQ6_K& b, int e) {
  const int half = e / 128, c = e % 128 / 32, t = e % 32;
  const uint8_t ql = b.ql[64 * half + 32 * (c % 2) + t];
  const uint8_t qh = b.qh[32 * half + t];
  return (c < 2 ? ql & 0xF : ql >> 4) | ((qh >> (2 * c)) & 3) << 4;
}

float dot_q6_K(int64_t k, const quant::BlockQ6_K* w, const quant::BlockQ8_K* a) {
  float lanes[8] = {};
  for (int64_t s = 0; s < k / 256; ++s) {
    // Lane l: values 32c + 4l .. 32c + 4l + 3 of every 32 (c = 0..7), each group of four times
    // the scale of its 16, less the bias split by lanes as ggml does (q6_K_levels_avx2.h).
    int lane_sums[8];
    for (int l = 0; l < 8; ++l) {
      int sum = 0;
      for (int c = 0; c < 8; ++c) {
        const int base = 32 * c + 4 * l;
        int four = 0;
        for (int e = base; e < base + 4; ++e) four += q6_K_level(w[s], e) * a[s].qs[e];
        sum += w[s].scales[base / 16] * four;
      }
      sum -= 32 * (a[s].bsums[2 * l] * w[s].scales[2 * l] + a[s].bsums[2 * l + 1] * w[s].scales[2 * l + 1]);
      lane_sums[l] = sum;
    }
    const float d = a[s].d * f16_to_f32(w[s].d);
    for (int l = 0; l < 8; ++l) lanes[l] = std::fma(d, static_cast<float>(lane_sums[l]), lanes[l]);
  }
  return reduce_lanes8(lanes);
}

}  // namespace

void gemm_q6_K(const Tile& t) {
  for (int64_t r = 0; r < t.n_act; ++r) {
    const auto* a = reinterpret_cast<const quant::BlockQ8_K*>(t.act + static_cast<size_t>(r) * t.act_stride);
    for (int64_t i = 0; i < t.n_rows; ++i)
      *out_ptr(t, r, i) = dot_q6_K(
          t.k, reinterpret_cast<const quant::BlockQ6_K*>(t.w + static_cast<size_t>(i) * t.w_stride), a);
  }
}

}  // namespace kiln::gemm
