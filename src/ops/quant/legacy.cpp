// Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q8_1: 32-value blocks. ref: ggml/src/ggml-quants.c
#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstring>

#include "core/dtype.h"
#include "core/half.h"
#include "ops/quant/kernels.h"
#include "ops/quant/row_loop.h"
#include "ops/quant/search.h"

namespace kiln::quant {
namespace {

// Absolute maximum and the signed value that attains it (first occurrence wins).
inline void signed_absmax(const float* x, int n, float* amax, float* max) {
  *amax = 0.0f;
  *max = 0.0f;
  for (int j = 0; j < n; ++j) {
    if (*amax < std::fabs(x[j])) {
      *amax = std::fabs(x[j]);
      *max = x[j];
    }
  }
}

inline void min_max(const float* x, int n, float* min, float* max) {
  *min = FLT_MAX;
  *max = -FLT_MAX;
  for (int j = 0; j < n; ++j) {
    if (x[j] < *min) *min = x[j];
    if (x[j] > *max) *max = x[j];
  }
}

// Packs 32 5-bit levels (low nibbles into qs, 5th bits into qh). Levels j and j + 16 share a byte.
inline void pack_5bit(const uint8_t* L, uint8_t* qs, uint8_t* qh_out) {
  uint32_t qh = 0;
  for (int j = 0; j < 16; ++j) {
    const uint8_t xi0 = L[j];
    const uint8_t xi1 = L[j + 16];
    qs[j] = static_cast<uint8_t>((xi0 & 0x0F) | ((xi1 & 0x0F) << 4));
    qh |= ((xi0 & 0x10u) >> 4) << (j + 0);
    qh |= ((xi1 & 0x10u) >> 4) << (j + 16);
  }
  std::memcpy(qh_out, &qh, sizeof(qh));
}

// sigma2 = mean(x^2) over a row: the imatrix weighting of the 32-value formats.
inline float row_sigma2(const float* x, int64_t n) {
  float sum_x2 = 0;
  for (int64_t j = 0; j < n; ++j) sum_x2 += x[j] * x[j];
  return sum_x2 / n;
}

inline void imatrix_weights(const float* xb, const float* qw, float sigma2, int n, float* weight) {
  for (int j = 0; j < n; ++j) weight[j] = qw[j] * std::sqrt(sigma2 + xb[j] * xb[j]);
}

}  // namespace

// ---------------------------------------------------------------- dequantization

void dequantize_row_q4_0(const BlockQ4_0* x, float* y, int64_t n) {
  const int64_t nb = n / kQK4_0;
  for (int64_t i = 0; i < nb; ++i) {
    const float d = f16_to_f32(x[i].d);
    for (int j = 0; j < kQK4_0 / 2; ++j) {
      const int x0 = (x[i].qs[j] & 0x0F) - 8;
      const int x1 = (x[i].qs[j] >> 4) - 8;
      y[i * kQK4_0 + j] = x0 * d;
      y[i * kQK4_0 + j + kQK4_0 / 2] = x1 * d;
    }
  }
}

void dequantize_row_q4_1(const BlockQ4_1* x, float* y, int64_t n) {
  const int64_t nb = n / kQK4_1;
  for (int64_t i = 0; i < nb; ++i) {
    const float d = f16_to_f32(x[i].d);
    const float m = f16_to_f32(x[i].m);
    for (int j = 0; j < kQK4_1 / 2; ++j) {
      const int x0 = x[i].qs[j] & 0x0F;
      const int x1 = x[i].qs[j] >> 4;
      y[i * kQK4_1 + j] = x0 * d + m;
      y[i * kQK4_1 + j + kQK4_1 / 2] = x1 * d + m;
    }
  }
}

void dequantize_row_q5_0(const BlockQ5_0* x, float* y, int64_t n) {
  const int64_t nb = n / kQK5_0;
  for (int64_t i = 0; i < nb; ++i) {
    const float d = f16_to_f32(x[i].d);
    uint32_t qh;
    std::memcpy(&qh, x[i].qh, sizeof(qh));
    for (int j = 0; j < kQK5_0 / 2; ++j) {
      const uint8_t xh_0 = ((qh >> (j + 0)) << 4) & 0x10;
      const uint8_t xh_1 = ((qh >> (j + 12))) & 0x10;
      const int32_t x0 = ((x[i].qs[j] & 0x0F) | xh_0) - 16;
      const int32_t x1 = ((x[i].qs[j] >> 4) | xh_1) - 16;
      y[i * kQK5_0 + j] = x0 * d;
      y[i * kQK5_0 + j + kQK5_0 / 2] = x1 * d;
    }
  }
}

void dequantize_row_q5_1(const BlockQ5_1* x, float* y, int64_t n) {
  const int64_t nb = n / kQK5_1;
  for (int64_t i = 0; i < nb; ++i) {
    const float d = f16_to_f32(x[i].d);
    const float m = f16_to_f32(x[i].m);
    uint32_t qh;
    std::memcpy(&qh, x[i].qh, sizeof(qh));
    for (int j = 0; j < kQK5_1 / 2; ++j) {
      const uint8_t xh_0 = ((qh >> (j + 0)) << 4) & 0x10;
      const uint8_t xh_1 = ((qh >> (j + 12))) & 0x10;
      const int x0 = (x[i].qs[j] & 0x0F) | xh_0;
      const int x1 = (x[i].qs[j] >> 4) | xh_1;
      y[i * kQK5_1 + j] = x0 * d + m;
      y[i * kQK5_1 + j + kQK5_1 / 2] = x1 * d + m;
    }
  }
}

void dequantize_row_q8_0(const BlockQ8_0* x, float* y, int64_t n) {
  const int64_t nb = n / kQK8_0;
  for (int64_t i = 0; i < nb; ++i) {
    const float d = f16_to_f32(x[i].d);
    for (int j = 0; j < kQK8_0; ++j) y[i * kQK8_0 + j] = x[i].qs[j] * d;
  }
}

void dequantize_row_q8_1(const BlockQ8_1* x, float* y, int64_t n) {
  const int64_t nb = n / kQK8_1;
  for (int64_t i = 0; i < nb; ++i) {
    const float d = f16_to_f32(x[i].d);
    for (int j = 0; j < kQK8_1; ++j) y[i * kQK8_1 + j] = x[i].qs[j] * d;
  }
}

// ---------------------------------------------------------------- reference quantizers

void quantize_row_q4_0_ref(const float* x, BlockQ4_0* y, int64_t n) {
  const int64_t nb = n / kQK4_0;
  for (int64_t i = 0; i < nb; ++i) {
    const float* xb = x + i * kQK4_0;
    float amax, max;
    signed_absmax(xb, kQK4_0, &amax, &max);
    const float d = max / -8;
    const float id = d ? 1.0f / d : 0.0f;
    y[i].d = f32_to_f16(d);
    for (int j = 0; j < kQK4_0 / 2; ++j) {
      const float x0 = xb[j] * id;
      const float x1 = xb[kQK4_0 / 2 + j] * id;
      const uint8_t xi0 =
          static_cast<uint8_t>(std::min(15, static_cast<int>(static_cast<int8_t>(x0 + 8.5f))));
      const uint8_t xi1 =
          static_cast<uint8_t>(std::min(15, static_cast<int>(static_cast<int8_t>(x1 + 8.5f))));
      y[i].qs[j] = static_cast<uint8_t>(xi0 | (xi1 << 4));
    }
  }
}

void quantize_row_q4_1_ref(const float* x, BlockQ4_1* y, int64_t n) {
  const int64_t nb = n / kQK4_1;
  for (int64_t i = 0; i < nb; ++i) {
    const float* xb = x + i * kQK4_1;
    float min, max;
    min_max(xb, kQK4_1, &min, &max);
    const float d = (max - min) / ((1 << 4) - 1);
    const float id = d ? 1.0f / d : 0.0f;
    y[i].d = f32_to_f16(d);
    y[i].m = f32_to_f16(min);
    for (int j = 0; j < kQK4_1 / 2; ++j) {
      const float x0 = (xb[j] - min) * id;
      const float x1 = (xb[kQK4_1 / 2 + j] - min) * id;
      const uint8_t xi0 =
          static_cast<uint8_t>(std::min(15, static_cast<int>(static_cast<int8_t>(x0 + 0.5f))));
      const uint8_t xi1 =
          static_cast<uint8_t>(std::min(15, static_cast<int>(static_cast<int8_t>(x1 + 0.5f))));
      y[i].qs[j] = static_cast<uint8_t>(xi0 | (xi1 << 4));
    }
  }
}

void quantize_row_q5_0_ref(const float* x, BlockQ5_0* y, int64_t n) {
  const int64_t nb = n / kQK5_0;
  for (int64_t i = 0; i < nb; ++i) {
    const float* xb = x + i * kQK5_0;
    float amax, max;
    signed_absmax(xb, kQK5_0, &amax, &max);
    const float d = max / -16;
    const float id = d ? 1.0f / d : 0.0f;
    y[i].d = f32_to_f16(d);
    uint8_t L[kQK5_0];
    for (int j = 0; j < kQK5_0; ++j) {
      L[j] = static_cast<uint8_t>(std::min(31, static_cast<int>(static_cast<int8_t>(xb[j] * id + 16.5f))));
    }
    pack_5bit(L, y[i].qs, y[i].qh);
  }
}

void quantize_row_q5_1_ref(const float* x, BlockQ5_1* y, int64_t n) {
  const int64_t nb = n / kQK5_1;
  for (int64_t i = 0; i < nb; ++i) {
    const float* xb = x + i * kQK5_1;
    float min, max;
    min_max(xb, kQK5_1, &min, &max);
    const float d = (max - min) / ((1 << 5) - 1);
    const float id = d ? 1.0f / d : 0.0f;
    y[i].d = f32_to_f16(d);
    y[i].m = f32_to_f16(min);
    uint8_t L[kQK5_1];
    for (int j = 0; j < kQK5_1; ++j) L[j] = static_cast<uint8_t>((xb[j] - min) * id + 0.5f);
    pack_5bit(L, y[i].qs, y[i].qh);
  }
}

void quantize_row_q8_0_ref(const float* x, BlockQ8_0* y, int64_t n) {
  const int64_t nb = n / kQK8_0;
  for (int64_t i = 0; i < nb; ++i) {
    const float* xb = x + i * kQK8_0;
    float amax = 0.0f;
    for (int j = 0; j < kQK8_0; ++j) amax = std::max(amax, std::fabs(xb[j]));
    const float d = amax / ((1 << 7) - 1);
    const float id = d ? 1.0f / d : 0.0f;
    y[i].d = f32_to_f16(d);
    for (int j = 0; j < kQK8_0; ++j) y[i].qs[j] = static_cast<int8_t>(std::round(xb[j] * id));
  }
}

void quantize_row_q8_1_ref(const float* x, BlockQ8_1* y, int64_t n) {
  const int64_t nb = n / kQK8_1;
  for (int64_t i = 0; i < nb; ++i) {
    const float* xb = x + i * kQK8_1;
    float amax = 0.0f;
    for (int j = 0; j < kQK8_1; ++j) amax = std::max(amax, std::fabs(xb[j]));
    const float d = amax / ((1 << 7) - 1);
    const float id = d ? 1.0f / d : 0.0f;
    y[i].d = f32_to_f16(d);
    int sum = 0;
    for (int j = 0; j < kQK8_1; ++j) {
      y[i].qs[j] = static_cast<int8_t>(std::round(xb[j] * id));
      sum += y[i].qs[j];
    }
    y[i].s = f32_to_f16(sum * d);
  }
}

// ---------------------------------------------------------------- chunk quantizers (imatrix)

size_t quantize_q4_0(const float* src, void* dst, int64_t nrows, int64_t n_per_row, const float* qw) {
  if (!qw) {
    quantize_row_q4_0_ref(src, static_cast<BlockQ4_0*>(dst), nrows * n_per_row);
    return static_cast<size_t>(nrows) * row_size(DType::Q4_0, n_per_row);
  }
  return for_each_row<BlockQ4_0>(DType::Q4_0, src, dst, nrows, n_per_row, [&](const float* x, BlockQ4_0* y) {
    const float sigma2 = row_sigma2(x, n_per_row);
    float weight[kQK4_0];
    int8_t L[kQK4_0];
    for (int64_t ib = 0; ib < n_per_row / kQK4_0; ++ib) {
      const float* xb = x + kQK4_0 * ib;
      imatrix_weights(xb, qw + kQK4_0 * ib, sigma2, kQK4_0, weight);
      const float d = make_qx_quants(kQK4_0, 8, xb, L, 1, weight);
      y[ib].d = f32_to_f16(d);
      for (int j = 0; j < 16; ++j) y[ib].qs[j] = static_cast<uint8_t>(L[j] | (L[j + 16] << 4));
    }
  });
}

size_t quantize_q4_1(const float* src, void* dst, int64_t nrows, int64_t n_per_row, const float* qw) {
  if (!qw) {
    quantize_row_q4_1_ref(src, static_cast<BlockQ4_1*>(dst), nrows * n_per_row);
    return static_cast<size_t>(nrows) * row_size(DType::Q4_1, n_per_row);
  }
  return for_each_row<BlockQ4_1>(DType::Q4_1, src, dst, nrows, n_per_row, [&](const float* x, BlockQ4_1* y) {
    const float sigma2 = row_sigma2(x, n_per_row);
    float weight[kQK4_1];
    uint8_t L[kQK4_1], Laux[kQK4_1];
    for (int64_t ib = 0; ib < n_per_row / kQK4_1; ++ib) {
      const float* xb = x + kQK4_1 * ib;
      imatrix_weights(xb, qw + kQK4_1 * ib, sigma2, kQK4_1, weight);
      float min;
      const float d = make_qkx3_quants(kQK4_1, 15, xb, weight, L, &min, Laux, -0.9f, 0.05f, 36, false);
      y[ib].d = f32_to_f16(d);
      y[ib].m = f32_to_f16(-min);
      for (int j = 0; j < 16; ++j) y[ib].qs[j] = static_cast<uint8_t>(L[j] | (L[j + 16] << 4));
    }
  });
}

size_t quantize_q5_0(const float* src, void* dst, int64_t nrows, int64_t n_per_row, const float* qw) {
  if (!qw) {
    quantize_row_q5_0_ref(src, static_cast<BlockQ5_0*>(dst), nrows * n_per_row);
    return static_cast<size_t>(nrows) * row_size(DType::Q5_0, n_per_row);
  }
  return for_each_row<BlockQ5_0>(DType::Q5_0, src, dst, nrows, n_per_row, [&](const float* x, BlockQ5_0* y) {
    const float sigma2 = row_sigma2(x, n_per_row);
    float weight[kQK5_0];
    int8_t L[kQK5_0];
    for (int64_t ib = 0; ib < n_per_row / kQK5_0; ++ib) {
      const float* xb = x + kQK5_0 * ib;
      imatrix_weights(xb, qw + kQK5_0 * ib, sigma2, kQK5_0, weight);
      const float d = make_qx_quants(kQK5_0, 16, xb, L, 1, weight);
      y[ib].d = f32_to_f16(d);
      pack_5bit(reinterpret_cast<const uint8_t*>(L), y[ib].qs, y[ib].qh);
    }
  });
}

size_t quantize_q5_1(const float* src, void* dst, int64_t nrows, int64_t n_per_row, const float* qw) {
  if (!qw) {
    quantize_row_q5_1_ref(src, static_cast<BlockQ5_1*>(dst), nrows * n_per_row);
    return static_cast<size_t>(nrows) * row_size(DType::Q5_1, n_per_row);
  }
  return for_each_row<BlockQ5_1>(DType::Q5_1, src, dst, nrows, n_per_row, [&](const float* x, BlockQ5_1* y) {
    const float sigma2 = row_sigma2(x, n_per_row);
    float weight[kQK5_1];
    uint8_t L[kQK5_1], Laux[kQK5_1];
    for (int64_t ib = 0; ib < n_per_row / kQK5_1; ++ib) {
      const float* xb = x + kQK5_1 * ib;
      imatrix_weights(xb, qw + kQK5_1 * ib, sigma2, kQK5_1, weight);
      float min;
      const float d = make_qkx3_quants(kQK5_1, 31, xb, weight, L, &min, Laux, -0.9f, 0.05f, 36, false);
      y[ib].d = f32_to_f16(d);
      y[ib].m = f32_to_f16(-min);
      pack_5bit(L, y[ib].qs, y[ib].qh);
    }
  });
}

size_t quantize_q8_0(const float* src, void* dst, int64_t nrows, int64_t n_per_row, const float* /*qw*/) {
  quantize_row_q8_0_ref(src, static_cast<BlockQ8_0*>(dst), nrows * n_per_row);  // ggml ignores qw
  return static_cast<size_t>(nrows) * row_size(DType::Q8_0, n_per_row);
}

}  // namespace kiln::quant
