// The scalar kernel of the IQ4_XS family (layouts.h): the oracle of the AVX2 kernel, one output at
// a time, in iqp's panel order (ggml-cpu/iqp.cpp) for the first Tile::n_gemm_act activation rows
// and in the AVX2 ggml_vec_dot_iq4_xs_q8_K order (quant.h's vec_dot_iq4_xs_q8_K_avx2) for the rest.
#include <cmath>
#include <cstdint>

#include "core/half.h"
#include "ops/gemm/layouts.h"
#include "ops/quant/kernels.h"

namespace kiln::gemm {
namespace {

// Value e (0..255) of a super-block as its integer level: per 32, the low nibbles of 16 bytes are
// values 0..15 and the high nibbles values 16..31.
int level(const quant::BlockIQ4XS& b, int e) {
  const uint8_t q = b.qs[16 * (e / 32) + e % 16];
  return quant::kValuesIQ4NL[e % 32 < 16 ? q & 0xF : q >> 4];
}

// The panel order: the super-block's whole integer sum (scale times levels times activations,
// exact), one FMA per super-block into one accumulator.
float dot_panel(int64_t k, const quant::BlockIQ4XS* w, const quant::BlockQ8_K* a) {
  float acc = 0.0f;
  for (int64_t s = 0; s < k / 256; ++s) {
    int32_t sum = 0;
    for (int ib = 0; ib < 8; ++ib) {
      int32_t sub = 0;
      for (int e = 32 * ib; e < 32 * ib + 32; ++e) sub += level(w[s], e) * a[s].qs[e];
      sum += quant::iq4_xs_scale(w[s], ib) * sub;
    }
    acc = std::fma(static_cast<float>(sum), f16_to_f32(w[s].d) * a[s].d, acc);
  }
  return acc;
}

// The vec_dot's order: eight int32 lanes (lane l: values 32ib + 4l .. 32ib + 4l + 3 of every
// sub-block ib, times its scale), each added as fma(d, float(lane), acc_l) per super-block, then
// hsum_float_8.
float dot_lanes(int64_t k, const quant::BlockIQ4XS* w, const quant::BlockQ8_K* a) {
  float lanes[8] = {};
  for (int64_t s = 0; s < k / 256; ++s) {
    const float d = f16_to_f32(w[s].d) * a[s].d;
    for (int l = 0; l < 8; ++l) {
      int32_t sum = 0;
      for (int ib = 0; ib < 8; ++ib) {
        int32_t four = 0;
        for (int e = 32 * ib + 4 * l; e < 32 * ib + 4 * l + 4; ++e) four += level(w[s], e) * a[s].qs[e];
        sum += quant::iq4_xs_scale(w[s], ib) * four;
      }
      lanes[l] = std::fma(d, static_cast<float>(sum), lanes[l]);
    }
  }
  return reduce_lanes8(lanes);
}

}  // namespace

void gemm_iq4_xs(const Tile& t) {
  for (int64_t r = 0; r < t.n_act; ++r) {
    const auto* a = reinterpret_cast<const quant::BlockQ8_K*>(t.act + static_cast<size_t>(r) * t.act_stride);
    const auto dot = r < t.n_gemm_act ? dot_panel : dot_lanes;
    for (int64_t i = 0; i < t.n_rows; ++i)
      *out_ptr(t, r, i) =
          dot(t.k, reinterpret_cast<const quant::BlockIQ4XS*>(t.w + static_cast<size_t>(i) * t.w_stride), a);
  }
}

}  // namespace kiln::gemm
