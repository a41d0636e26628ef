// The scalar kernels of the Q6_K, Q5_K, Q3_K and Q2_K families (layouts.h): the oracles of the AVX2
// kernels, one output at a time in the order of quant.h's vec_dot_q6_K_q8_K_avx2,
// vec_dot_q5_K_q8_K_avx2, vec_dot_q3_K_q8_K_avx2 and vec_dot_q2_K_q8_K_avx2.
#include <cmath>

#include "core/half.h"
#include "ops/gemm/layouts.h"
#include "ops/quant/search.h"

namespace kiln::gemm {
namespace {

// Level e (0..255, stored value 0..63, biased by 32) of a Q6_K super-block: in each half of 128,
// values 32c .. 32c+31 take the low (c < 2) or high nibbles of ql[32 (c % 2) ..] and bits 2c, 2c+1
// of qh.
int level(const quant::BlockQ6_K& b, int e) {
  const int half = e / 128, c = e % 128 / 32, t = e % 32;
  const uint8_t ql = b.ql[64 * half + 32 * (c % 2) + t];
  const uint8_t qh = b.qh[32 * half + t];
  return (c < 2 ? ql & 0xF : ql >> 4) | ((qh >> (2 * c)) & 3) << 4;
}

// Level e (0..31) of a Q5_K super-block: values 32c .. 32c+31 take the low (c even) or high nibbles
// of qs[32 (c / 2) ..] and bit c of qh.
int level(const quant::BlockQ5_K& b, int e) {
  const int c = e / 32, t = e % 32;
  const uint8_t q = b.qs[32 * (c / 2) + t];
  return (c % 2 == 0 ? q & 0xF : q >> 4) | ((b.qh[t] >> c) & 1) << 4;
}

// Level e (-4..3) of a Q3_K super-block: values 32c .. 32c+31 take bits 2 (c % 4), 2 (c % 4) + 1
// of qs[32 (c / 4) ..], less 4 where bit c of hmask is clear.
int level(const quant::BlockQ3_K& b, int e) {
  const int c = e / 32, t = e % 32;
  return ((b.qs[32 * (c / 4) + t] >> (2 * (c % 4))) & 3) - ((b.hmask[t] >> c) & 1 ? 0 : 4);
}

// Level e (0..3) of a Q2_K super-block: the same 2-bit fields as Q3_K's.
int level(const quant::BlockQ2_K& b, int e) {
  const int c = e / 32, t = e % 32;
  return (b.qs[32 * (c / 4) + t] >> (2 * (c % 4))) & 3;
}

// Q3_K's scale of values 16g .. 16g+15 (-32..31): four low bits from scales[g] (g < 8) or
// scales[g - 8] >> 4, two high bits from scales[8 + g % 4] at bit 2 (g / 4); less 32.
int q3_K_scale(const quant::BlockQ3_K& b, int g) {
  const int low = g < 8 ? b.scales[g] & 0xF : b.scales[g - 8] >> 4;
  return (low | ((b.scales[8 + g % 4] >> (2 * (g / 4))) & 3) << 4) - 32;
}

// Lane l of the vec_dots' eight int32 lanes before any bias: values 32c + 4l .. 32c + 4l + 3 of
// every chunk c = 0..7, each group of four times scale(c, l).
template <class Block, class Scale>
int lane_sum(const Block& w, const quant::BlockQ8_K& a, int l, Scale scale) {
  int sum = 0;
  for (int c = 0; c < 8; ++c) {
    int four = 0;
    for (int e = 32 * c + 4 * l; e < 32 * c + 4 * l + 4; ++e) four += level(w, e) * a.qs[e];
    sum += scale(c, l) * four;
  }
  return sum;
}

float dot_q6_K(int64_t k, const quant::BlockQ6_K* w, const quant::BlockQ8_K* a) {
  float lanes[8] = {};
  for (int64_t s = 0; s < k / 256; ++s) {
    const int8_t* sc = w[s].scales;  // one per 16 values
    const float d = a[s].d * f16_to_f32(w[s].d);
    for (int l = 0; l < 8; ++l) {
      // Less the bias 32 split by lanes as ggml does (k_quants_avx2.h q6_K_bias).
      const int sum = lane_sum(w[s], a[s], l, [&](int c, int ll) { return sc[2 * c + ll / 4]; }) -
                      32 * (a[s].bsums[2 * l] * sc[2 * l] + a[s].bsums[2 * l + 1] * sc[2 * l + 1]);
      lanes[l] = std::fma(d, static_cast<float>(sum), lanes[l]);
    }
  }
  return reduce_lanes8(lanes);
}

float dot_q5_K(int64_t k, const quant::BlockQ5_K* w, const quant::BlockQ8_K* a) {
  float lanes[8] = {}, min_lanes[4] = {};
  for (int64_t s = 0; s < k / 256; ++s) {
    uint8_t scales[8], mins[8];
    for (int j = 0; j < 8; ++j) quant::get_scale_min_k4(j, w[s].scales, &scales[j], &mins[j]);
    const float d = a[s].d * f16_to_f32(w[s].d);
    for (int l = 0; l < 8; ++l) {
      const int sum = lane_sum(w[s], a[s], l, [&](int c, int) { return int{scales[c]}; });
      lanes[l] = std::fma(d, static_cast<float>(sum), lanes[l]);
    }
    // The mins in four lanes: lane m takes sub-blocks 2m and 2m+1 (32 values each).
    const float dmin = -a[s].d * f16_to_f32(w[s].dmin);
    const int16_t* bs = a[s].bsums;
    for (int m = 0; m < 4; ++m) {
      const int sum =
          mins[2 * m] * (bs[4 * m] + bs[4 * m + 1]) + mins[2 * m + 1] * (bs[4 * m + 2] + bs[4 * m + 3]);
      min_lanes[m] = std::fma(dmin, static_cast<float>(sum), min_lanes[m]);
    }
  }
  return reduce_lanes8(lanes) + ((min_lanes[0] + min_lanes[2]) + (min_lanes[1] + min_lanes[3]));
}

float dot_q3_K(int64_t k, const quant::BlockQ3_K* w, const quant::BlockQ8_K* a) {
  float lanes[8] = {};
  for (int64_t s = 0; s < k / 256; ++s) {
    const float d = a[s].d * f16_to_f32(w[s].d);
    for (int l = 0; l < 8; ++l) {
      // Lane l's values 4l .. 4l+3 of chunk c lie in the 16-value group 2c + l / 4.
      const int sum =
          lane_sum(w[s], a[s], l, [&](int c, int ll) { return q3_K_scale(w[s], 2 * c + ll / 4); });
      lanes[l] = std::fma(d, static_cast<float>(sum), lanes[l]);
    }
  }
  return reduce_lanes8(lanes);
}

float dot_q2_K(int64_t k, const quant::BlockQ2_K* w, const quant::BlockQ8_K* a) {
  float lanes[8] = {}, mins = 0;
  for (int64_t s = 0; s < k / 256; ++s) {
    const uint8_t* sc = w[s].scales;  // per 16 values: the scale (low nibble) and the min
    int min_sum = 0;
    for (int g = 0; g < 16; ++g) min_sum += (sc[g] >> 4) * a[s].bsums[g];
    mins -= a[s].d * f16_to_f32(w[s].dmin) * static_cast<float>(min_sum);
    const float d = a[s].d * f16_to_f32(w[s].d);
    for (int l = 0; l < 8; ++l) {
      const int sum = lane_sum(w[s], a[s], l, [&](int c, int ll) { return sc[2 * c + ll / 4] & 0xF; });
      lanes[l] = std::fma(d, static_cast<float>(sum), lanes[l]);
    }
  }
  return reduce_lanes8(lanes) + mins;
}

template <class Block, float (*dot)(int64_t, const Block*, const quant::BlockQ8_K*)>
void each_output(const Tile& t) {
  for (int64_t r = 0; r < t.n_act; ++r) {
    const auto* a = reinterpret_cast<const quant::BlockQ8_K*>(t.act + static_cast<size_t>(r) * t.act_stride);
    for (int64_t i = 0; i < t.n_rows; ++i)
      *out_ptr(t, r, i) =
          dot(t.k, reinterpret_cast<const Block*>(t.w + static_cast<size_t>(i) * t.w_stride), a);
  }
}

}  // namespace

void gemm_q6_K(const Tile& t) { each_output<quant::BlockQ6_K, dot_q6_K>(t); }
void gemm_q5_K(const Tile& t) { each_output<quant::BlockQ5_K, dot_q5_K>(t); }
void gemm_q3_K(const Tile& t) { each_output<quant::BlockQ3_K, dot_q3_K>(t); }
void gemm_q2_K(const Tile& t) { each_output<quant::BlockQ2_K, dot_q2_K>(t); }

}  // namespace kiln::gemm
