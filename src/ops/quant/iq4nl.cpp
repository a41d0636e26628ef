// IQ4_NL: 32-value blocks of 4-bit indices into a non-linear table (kValuesIQ4NL) with an F16 scale.
// ref: ggml/src/ggml-quants.c (quantize_row_iq4_nl_impl with super_block_size == block_size == 32)
#include <cmath>
#include <cstring>

#include "core/dtype.h"
#include "core/half.h"
#include "ops/quant/kernels.h"
#include "ops/quant/row_loop.h"
#include "ops/quant/search.h"

namespace kiln::quant {
namespace {

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

// One block of 32. ntry > 0: scale search over 2*ntry+1 candidates and a final re-quantization
// (the quantize_iq4_nl path); ntry < 0: one weighted pass only (the quantize_row_iq4_nl_ref path).
// qw: 32 importance weights or null (then x^2).
void quantize_iq4_nl_block(const float* x, BlockIQ4NL* y, const float* qw, int ntry) {
  constexpr int kBlock = kQK4_NL;
  const int8_t* values = kValuesIQ4NL;
  float sigma2 = 0;
  for (int j = 0; j < kBlock; ++j) sigma2 += x[j] * x[j];
  sigma2 *= 2.f / kBlock;

  float weight[kBlock];
  uint8_t L[kBlock];
  std::memset(y->qs, 0, kBlock / 2);
  y->d = f32_to_f16(0.f);

  if (qw) {
    for (int j = 0; j < kBlock; ++j) weight[j] = qw[j] * std::sqrt(sigma2 + x[j] * x[j]);
  } else {
    for (int j = 0; j < kBlock; ++j) weight[j] = x[j] * x[j];
  }
  float amax = 0, max = 0;
  for (int j = 0; j < kBlock; ++j) {
    const float ax = std::fabs(x[j]);
    if (ax > amax) {
      amax = ax;
      max = x[j];
    }
  }
  float scale = 0;
  if (amax >= kGroupMaxEps) {
    float d = ntry > 0 ? -max / values[0] : max / values[0];
    float id = 1 / d;
    float sumqx = 0, sumq2 = 0;
    for (int j = 0; j < kBlock; ++j) {
      const float al = id * x[j];
      const int l = best_index_int8(16, values, al);
      L[j] = static_cast<uint8_t>(l);
      const float q = values[l];
      const float w = weight[j];
      sumqx += w * q * x[j];
      sumq2 += w * q * q;
    }
    d = sumq2 > 0 ? sumqx / sumq2 : 0.f;
    float best = d * sumqx;
    for (int itry = -ntry; itry <= ntry; ++itry) {
      id = (itry + values[0]) / max;
      sumqx = sumq2 = 0;
      for (int j = 0; j < kBlock; ++j) {
        const float al = id * x[j];
        const int l = best_index_int8(16, values, al);
        const float q = values[l];
        const float w = weight[j];
        sumqx += w * q * x[j];
        sumq2 += w * q * q;
      }
      if (sumq2 > 0 && sumqx * sumqx > best * sumq2) {
        d = sumqx / sumq2;
        best = d * sumqx;
      }
    }
    scale = d;
  }
  // An all-zero block on the ntry < 0 path: ggml packs stale levels from the previous block (its
  // scale is 0, so every value is 0 either way); kiln leaves the indices 0.
  y->d = f32_to_f16(scale);
  if (ntry > 0) {
    const float id = scale ? 1 / scale : 0;
    for (int j = 0; j < kBlock; ++j) L[j] = static_cast<uint8_t>(best_index_int8(16, values, id * x[j]));
  } else if (amax < kGroupMaxEps) {
    return;
  }
  for (int j = 0; j < 16; ++j) y->qs[j] = static_cast<uint8_t>(L[j] | (L[j + 16] << 4));
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

void quantize_row_iq4_nl_ref(const float* x, BlockIQ4NL* y, int64_t n) {
  for (int64_t ib = 0; ib < n / kQK4_NL; ++ib) quantize_iq4_nl_block(x + kQK4_NL * ib, &y[ib], nullptr, -1);
}

size_t quantize_iq4_nl(const float* src, void* dst, int64_t nrows, int64_t n_per_row, const float* qw) {
  return for_each_row<BlockIQ4NL>(
      DType::IQ4_NL, src, dst, nrows, n_per_row, [&](const float* x, BlockIQ4NL* y) {
        for (int64_t ib = 0; ib < n_per_row / kQK4_NL; ++ib) {
          quantize_iq4_nl_block(x + kQK4_NL * ib, &y[ib], qw ? qw + kQK4_NL * ib : nullptr, 7);
        }
      });
}

}  // namespace kiln::quant
