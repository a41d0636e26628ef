// The non-linear 4-bit formats: 4-bit indices into kValuesIQ4NL, in sub-blocks of 32.
//   IQ4_NL: one F16 scale per 32.
//   IQ4_XS: super-blocks of 256 with an F16 scale and a 6-bit signed scale per 32.
// ref: ggml/src/ggml-quants.c (quantize_row_iq4_nl_impl, quantize_iq4_nl, quantize_iq4_xs,
// dequantize_row_iq4_nl, dequantize_row_iq4_xs)
#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/dtype.h"
#include "core/half.h"
#include "ops/quant/kernels.h"
#include "ops/quant/row_loop.h"
#include "ops/quant/search.h"

namespace kiln::quant {
namespace {

constexpr int kSub = 32;  // values per scale

// Index of the table level nearest to x; a tie picks the upper level. val sorted, n a power of 2.
// Compares 2x with the sum of neighbours so both sides are exact. ref: best_index_int8
inline int best_index_int8(int n, const int8_t* val, float x) {
  const float x2 = x + x;
  int idx = 0;
  for (int step = n >> 1; step > 0; step >>= 1) {
    const int j = idx + step;
    idx = (x2 >= static_cast<float>(val[j - 1] + val[j])) ? j : idx;
  }
  return idx;
}

// Best scale of one sub-block of 32 values xb with weights w; its levels go to Lb. ntry > 0:
// search over 2*ntry+1 candidate scales after the first weighted fit; ntry < 0: the fit only.
// An all-below-kGroupMaxEps sub-block: returns 0, sets *empty, leaves Lb untouched.
float sub_block_scale(const float* xb, const float* w, uint8_t* Lb, int ntry, bool* empty) {
  const int8_t* values = kValuesIQ4NL;
  float amax = 0, max = 0;
  for (int j = 0; j < kSub; ++j) {
    const float ax = std::fabs(xb[j]);
    if (ax > amax) {
      amax = ax;
      max = xb[j];
    }
  }
  *empty = amax < kGroupMaxEps;
  if (*empty) return 0;
  float d = ntry > 0 ? -max / values[0] : max / values[0];
  float id = 1 / d;
  float sumqx = 0, sumq2 = 0;
  for (int j = 0; j < kSub; ++j) {
    const int l = best_index_int8(16, values, id * xb[j]);
    Lb[j] = static_cast<uint8_t>(l);
    const float q = values[l];
    sumqx += w[j] * q * xb[j];
    sumq2 += w[j] * q * q;
  }
  d = sumq2 > 0 ? sumqx / sumq2 : 0.f;
  float best = d * sumqx;
  for (int itry = -ntry; itry <= ntry; ++itry) {
    id = (itry + values[0]) / max;
    sumqx = sumq2 = 0;
    for (int j = 0; j < kSub; ++j) {
      const float q = values[best_index_int8(16, values, id * xb[j])];
      sumqx += w[j] * q * xb[j];
      sumq2 += w[j] * q * q;
    }
    if (sumq2 > 0 && sumqx * sumqx > best * sumq2) {
      d = sumqx / sumq2;
      best = d * sumqx;
    }
  }
  return d;
}

// Levels of one sub-block for the scale d (index of the level nearest to x / d; all 0 / d = 0).
void sub_block_levels(const float* xb, float d, uint8_t* Lb) {
  const float id = d ? 1 / d : 0.f;
  for (int j = 0; j < kSub; ++j) Lb[j] = static_cast<uint8_t>(best_index_int8(16, kValuesIQ4NL, id * xb[j]));
}

// Per-value weights of one sub-block: qw * sqrt(sigma2 + x^2) with importance weights, else x^2.
void sub_block_weights(const float* xb, const float* qw, float sigma2, float* w) {
  if (qw) {
    for (int j = 0; j < kSub; ++j) w[j] = qw[j] * std::sqrt(sigma2 + xb[j] * xb[j]);
  } else {
    for (int j = 0; j < kSub; ++j) w[j] = xb[j] * xb[j];
  }
}

// 2 / n * sum(x^2) over the n values of a (super-)block: the weights' variance term.
float sigma2_of(const float* x, int n) {
  float s = 0;
  for (int j = 0; j < n; ++j) s += x[j] * x[j];
  return s * (2.f / static_cast<float>(n));
}

// Packs 32 levels per sub-block: byte j holds element j (low nibble) and j + 16 (high).
void pack_levels(const uint8_t* L, uint8_t* q4, int nsub) {
  for (int i = 0; i < nsub; ++i) {
    for (int j = 0; j < 16; ++j) q4[16 * i + j] = static_cast<uint8_t>(L[32 * i + j] | (L[32 * i + 16 + j] << 4));
  }
}

// One IQ4_NL block. ntry 7: the quantize_iq4_nl path (search, then re-quantization with the final
// scale); ntry -1: the quantize_row_iq4_nl_ref path (one weighted fit). qw: 32 weights or null.
void quantize_iq4_nl_block(const float* x, BlockIQ4NL* y, const float* qw, int ntry) {
  float weight[kSub];
  uint8_t L[kSub];
  sub_block_weights(x, qw, sigma2_of(x, kSub), weight);
  bool empty = false;
  const float d = sub_block_scale(x, weight, L, ntry, &empty);
  y->d = f32_to_f16(d);
  std::memset(y->qs, 0, sizeof(y->qs));
  if (ntry > 0) {
    sub_block_levels(x, d, L);
  } else if (empty) {
    // An all-zero block on the ntry < 0 path: ggml packs stale levels from the previous block
    // (its scale is 0, so every value is 0 either way); kiln leaves the indices 0.
    return;
  }
  pack_levels(L, y->qs, 1);
}

// One IQ4_XS super-block of 256 (ggml always searches: ntry 7). The 8 sub-block scales are
// quantized to 6 bits against d = -max_scale / 32 (max_scale: the scale of largest magnitude, so
// d is -0.0 for an all-zero block, as in ggml), and each sub-block is re-quantized with its
// quantized scale. qw: 256 weights or null.
void quantize_iq4_xs_block(const float* x, BlockIQ4XS* y, const float* qw) {
  constexpr int kNSub = kQK_K / kSub;
  const float sigma2 = sigma2_of(x, kQK_K);
  float weight[kSub];
  float scales[kNSub];
  uint8_t L[kQK_K];
  float max_scale = 0, amax_scale = 0;
  for (int ib = 0; ib < kNSub; ++ib) {
    sub_block_weights(x + kSub * ib, qw ? qw + kSub * ib : nullptr, sigma2, weight);
    bool empty = false;  // its levels are set below from scale 0
    scales[ib] = sub_block_scale(x + kSub * ib, weight, L + kSub * ib, 7, &empty);
    if (std::fabs(scales[ib]) > amax_scale) {
      amax_scale = std::fabs(scales[ib]);
      max_scale = scales[ib];
    }
  }
  const float d = -max_scale / 32;
  y->d = f32_to_f16(d);
  const float id = d ? 1 / d : 0.f;
  y->scales_h = 0;
  std::memset(y->scales_l, 0, sizeof(y->scales_l));
  for (int ib = 0; ib < kNSub; ++ib) {
    const int l = std::clamp(nearest_int(id * scales[ib]), -32, 31);
    sub_block_levels(x + kSub * ib, d * static_cast<float>(l), L + kSub * ib);
    const int lu = l + 32;
    y->scales_l[ib / 2] = static_cast<uint8_t>(y->scales_l[ib / 2] | ((lu & 0xf) << (4 * (ib % 2))));
    y->scales_h = static_cast<uint16_t>(y->scales_h | ((lu >> 4) << (2 * ib)));
  }
  pack_levels(L, y->qs, kNSub);
}

}  // namespace

void dequantize_row_iq4_nl(const BlockIQ4NL* x, float* y, int64_t n) {
  const int64_t nb = n / kQK4_NL;
  for (int64_t i = 0; i < nb; ++i) {
    const uint8_t* qs = x[i].qs;
    const float d = f16_to_f32(x[i].d);
    for (int j = 0; j < kQK4_NL / 2; ++j) {
      y[j + 0] = d * kValuesIQ4NL[qs[j] & 0xf];
      y[j + kQK4_NL / 2] = d * kValuesIQ4NL[qs[j] >> 4];
    }
    y += kQK4_NL;
  }
}

void dequantize_row_iq4_xs(const BlockIQ4XS* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    const uint8_t* qs = x[i].qs;
    const float d = f16_to_f32(x[i].d);
    for (int ib = 0; ib < kQK_K / kSub; ++ib) {
      const float dl = d * static_cast<float>(iq4_xs_scale(x[i], ib));
      for (int j = 0; j < 16; ++j) {
        y[j + 0] = dl * kValuesIQ4NL[qs[j] & 0xf];
        y[j + 16] = dl * kValuesIQ4NL[qs[j] >> 4];
      }
      y += kSub;
      qs += 16;
    }
  }
}

void quantize_row_iq4_nl_ref(const float* x, BlockIQ4NL* y, int64_t n) {
  for (int64_t ib = 0; ib < n / kQK4_NL; ++ib) quantize_iq4_nl_block(x + kQK4_NL * ib, &y[ib], nullptr, -1);
}

void quantize_row_iq4_xs_ref(const float* x, BlockIQ4XS* y, int64_t n) {
  quantize_iq4_xs(x, y, 1, n, nullptr);
}

size_t quantize_iq4_nl(const float* src, void* dst, int64_t nrows, int64_t n_per_row, const float* qw) {
  return for_each_row<BlockIQ4NL>(
      DType::IQ4_NL, src, dst, nrows, n_per_row, [&](const float* x, BlockIQ4NL* y) {
        for (int64_t ib = 0; ib < n_per_row / kQK4_NL; ++ib) {
          quantize_iq4_nl_block(x + kQK4_NL * ib, &y[ib], qw ? qw + kQK4_NL * ib : nullptr, 7);
        }
      });
}

size_t quantize_iq4_xs(const float* src, void* dst, int64_t nrows, int64_t n_per_row, const float* qw) {
  return for_each_row<BlockIQ4XS>(
      DType::IQ4_XS, src, dst, nrows, n_per_row, [&](const float* x, BlockIQ4XS* y) {
        for (int64_t ib = 0; ib < n_per_row / kQK_K; ++ib) {
          quantize_iq4_xs_block(x + kQK_K * ib, &y[ib], qw ? qw + kQK_K * ib : nullptr);
        }
      });
}

}  // namespace kiln::quant
