// K-quants: Q2_K, Q3_K, Q4_K, Q5_K, Q6_K and the activation format Q8_K, super-blocks of 256.
// ref: ggml/src/ggml-quants.c (quantize_row_*_ref, quantize_row_*_impl, dequantize_row_*)
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

// Packs 256 2-bit levels: byte l of each 32-byte group holds levels l, l+32, l+64, l+96.
inline void pack_2bit(const uint8_t* L, uint8_t* qs) {
  for (int j = 0; j < kQK_K; j += 128) {
    for (int l = 0; l < 32; ++l) {
      qs[j / 4 + l] =
          static_cast<uint8_t>(L[j + l] | (L[j + l + 32] << 2) | (L[j + l + 64] << 4) | (L[j + l + 96] << 6));
    }
  }
}

// Stores 6-bit scale ls and min lm of sub-block j (0..7) in the 12-byte K-scale layout.
inline void set_scale_min_k4(int j, uint8_t ls, uint8_t lm, uint8_t* scales) {
  if (j < 4) {
    scales[j] = ls;
    scales[j + 4] = lm;
  } else {
    scales[j + 4] = static_cast<uint8_t>((ls & 0xF) | ((lm & 0xF) << 4));
    scales[j - 4] |= static_cast<uint8_t>((ls >> 4) << 6);
    scales[j - 0] |= static_cast<uint8_t>((lm >> 4) << 6);
  }
}

// Stores 6-bit (biased) scale l of sub-block j (0..15) in Q3_K's 12-byte layout; scales zeroed first.
inline void set_scale_q3(int j, int l, uint8_t* scales) {
  if (j < 8) {
    scales[j] = static_cast<uint8_t>(l & 0xF);
  } else {
    scales[j - 8] |= static_cast<uint8_t>((l & 0xF) << 4);
  }
  l >>= 4;
  scales[j % 4 + 8] |= static_cast<uint8_t>(l << (2 * (j / 4)));
}

inline int get_scale_q3(int j, const uint8_t* scales) {
  int8_t sc = static_cast<int8_t>(j < 8 ? scales[j] & 0xF : scales[j - 8] >> 4);
  sc = static_cast<int8_t>((sc | (((scales[8 + j % 4] >> (2 * (j / 4))) & 3) << 4)) - 32);
  return sc;
}

// Final Q2_K levels from the stored scales/mins, then packing. Shared by ref and imatrix paths.
void q2_K_requantize_and_pack(const float* x, BlockQ2_K* y, uint8_t* L) {
  const float dm_all = f16_to_f32(y->d);
  const float mm_all = f16_to_f32(y->dmin);
  for (int j = 0; j < kQK_K / 16; ++j) {
    const float d = dm_all * (y->scales[j] & 0xF);
    if (!d) continue;
    const float dm = mm_all * (y->scales[j] >> 4);
    for (int ii = 0; ii < 16; ++ii) {
      int l = nearest_int((x[16 * j + ii] + dm) / d);
      l = std::max(0, std::min(3, l));
      L[16 * j + ii] = static_cast<uint8_t>(l);
    }
  }
  pack_2bit(L, y->qs);
}

// Final Q3_K levels from the stored scales, high-bit mask and packing. Shared by both paths.
void q3_K_requantize_and_pack(const float* x, BlockQ3_K* y, int8_t* L) {
  for (int j = 0; j < kQK_K / 16; ++j) {
    const float d = f16_to_f32(y->d) * get_scale_q3(j, y->scales);
    if (!d) continue;
    for (int ii = 0; ii < 16; ++ii) {
      int l = nearest_int(x[16 * j + ii] / d);
      l = std::max(-4, std::min(3, l));
      L[16 * j + ii] = static_cast<int8_t>(l + 4);
    }
  }
  std::memset(y->hmask, 0, kQK_K / 8);
  // The high bit of the first 32 levels goes to bit 0 of hmask[0..31], the next 32 to bit 1, ...
  int m = 0;
  uint8_t hm = 1;
  for (int j = 0; j < kQK_K; ++j) {
    if (L[j] > 3) {
      y->hmask[m] |= hm;
      L[j] = static_cast<int8_t>(L[j] - 4);
    }
    if (++m == kQK_K / 8) {
      m = 0;
      hm = static_cast<uint8_t>(hm << 1);
    }
  }
  pack_2bit(reinterpret_cast<const uint8_t*>(L), y->qs);
}

// Final Q4_K/Q5_K levels (nmax 15 or 31) from the stored scales and mins.
template <class Block>
void qk_requantize(const float* x, const Block* y, int nmax, uint8_t* L) {
  for (int j = 0; j < kQK_K / 32; ++j) {
    uint8_t sc, m;
    get_scale_min_k4(j, y->scales, &sc, &m);
    const float d = f16_to_f32(y->d) * sc;
    if (!d) continue;
    const float dm = f16_to_f32(y->dmin) * m;
    for (int ii = 0; ii < 32; ++ii) {
      int l = nearest_int((x[32 * j + ii] + dm) / d);
      l = std::max(0, std::min(nmax, l));
      L[32 * j + ii] = static_cast<uint8_t>(l);
    }
  }
}

inline void pack_q4_K(const uint8_t* L, BlockQ4_K* y) {
  uint8_t* q = y->qs;
  for (int j = 0; j < kQK_K; j += 64) {
    for (int l = 0; l < 32; ++l) q[l] = static_cast<uint8_t>(L[j + l] | (L[j + l + 32] << 4));
    q += 32;
  }
}

inline void pack_q5_K(const uint8_t* L, BlockQ5_K* y) {
  uint8_t* qh = y->qh;
  uint8_t* ql = y->qs;
  std::memset(qh, 0, kQK_K / 8);
  uint8_t m1 = 1, m2 = 2;
  for (int n = 0; n < kQK_K; n += 64) {
    for (int j = 0; j < 32; ++j) {
      int l1 = L[n + j];
      if (l1 > 15) {
        l1 -= 16;
        qh[j] |= m1;
      }
      int l2 = L[n + j + 32];
      if (l2 > 15) {
        l2 -= 16;
        qh[j] |= m2;
      }
      ql[j] = static_cast<uint8_t>(l1 | (l2 << 4));
    }
    m1 = static_cast<uint8_t>(m1 << 2);
    m2 = static_cast<uint8_t>(m2 << 2);
    ql += 32;
  }
}

// Q4_K/Q5_K reference path: per-32 asymmetric search, 6-bit scales relative to the maxima.
template <class Block>
void quantize_qk_ref_block(const float* x, Block* y, int nmax, float rmin, float rdelta, int nstep,
                           uint8_t* L) {
  uint8_t Laux[32];
  float weights[32];
  float mins[kQK_K / 32];
  float scales[kQK_K / 32];
  float max_scale = 0;  // as the min is subtracted, scales are always positive
  float max_min = 0;
  for (int j = 0; j < kQK_K / 32; ++j) {
    float sum_x2 = 0;
    for (int l = 0; l < 32; ++l) sum_x2 += x[32 * j + l] * x[32 * j + l];
    const float av_x = std::sqrt(sum_x2 / 32);
    for (int l = 0; l < 32; ++l) weights[l] = av_x + std::fabs(x[32 * j + l]);
    scales[j] = make_qkx2_quants(32, nmax, x + 32 * j, weights, L + 32 * j, &mins[j], Laux, rmin, rdelta,
                                 nstep, false);
    if (scales[j] > max_scale) max_scale = scales[j];
    if (mins[j] > max_min) max_min = mins[j];
  }
  const float inv_scale = max_scale > 0 ? 63.f / max_scale : 0.f;
  const float inv_min = max_min > 0 ? 63.f / max_min : 0.f;
  for (int j = 0; j < kQK_K / 32; ++j) {
    uint8_t ls = static_cast<uint8_t>(nearest_int(inv_scale * scales[j]));
    uint8_t lm = static_cast<uint8_t>(nearest_int(inv_min * mins[j]));
    ls = std::min<uint8_t>(63, ls);
    lm = std::min<uint8_t>(63, lm);
    set_scale_min_k4(j, ls, lm, y->scales);
  }
  y->d = f32_to_f16(max_scale / 63.f);
  y->dmin = f32_to_f16(max_min / 63.f);
  qk_requantize(x, y, nmax, L);
}

// Q4_K/Q5_K imatrix path: weighted search, then 6-bit super-block scales by make_qp_quants.
template <class Block>
void quantize_qk_impl_block(const float* x, Block* y, int nmax, const float* qw, uint8_t* L) {
  uint8_t Laux[32];
  uint8_t Ls[kQK_K / 32];
  uint8_t Lm[kQK_K / 32];
  float weights[32];
  float sw[kQK_K / 32];
  float mins[kQK_K / 32];
  float scales[kQK_K / 32];
  float sum_x2 = 0;
  for (int l = 0; l < kQK_K; ++l) sum_x2 += x[l] * x[l];
  const float sigma2 = 2 * sum_x2 / kQK_K;
  const float av_x = std::sqrt(sigma2);
  for (int j = 0; j < kQK_K / 32; ++j) {
    if (qw) {
      for (int l = 0; l < 32; ++l)
        weights[l] = qw[32 * j + l] * std::sqrt(sigma2 + x[32 * j + l] * x[32 * j + l]);
    } else {
      for (int l = 0; l < 32; ++l) weights[l] = av_x + std::fabs(x[32 * j + l]);
    }
    float sumw = 0;
    for (int l = 0; l < 32; ++l) sumw += weights[l];
    sw[j] = sumw;
    scales[j] =
        make_qkx3_quants(32, nmax, x + 32 * j, weights, L + 32 * j, &mins[j], Laux, -0.9f, 0.05f, 36, false);
  }
  const float d_block = make_qp_quants(kQK_K / 32, 63, scales, Ls, sw);
  const float m_block = make_qp_quants(kQK_K / 32, 63, mins, Lm, sw);
  for (int j = 0; j < kQK_K / 32; ++j) {
    set_scale_min_k4(j, std::min<uint8_t>(63, Ls[j]), std::min<uint8_t>(63, Lm[j]), y->scales);
  }
  y->d = f32_to_f16(d_block);
  y->dmin = f32_to_f16(m_block);
  qk_requantize(x, y, nmax, L);
}

// Q6_K (both paths): per-16 symmetric search (weights qw or x^2), 8-bit scales.
void quantize_q6_K_block(const float* x, BlockQ6_K* y, const float* qw) {
  int8_t L[kQK_K];
  float scales[kQK_K / 16];
  float max_scale = 0;
  float max_abs_scale = 0;
  for (int ib = 0; ib < kQK_K / 16; ++ib) {
    const float scale = make_qx_quants(16, 32, x + 16 * ib, L + 16 * ib, 1, qw ? qw + 16 * ib : nullptr);
    scales[ib] = scale;
    const float abs_scale = std::fabs(scale);
    if (abs_scale > max_abs_scale) {
      max_abs_scale = abs_scale;
      max_scale = scale;
    }
  }
  if (max_abs_scale < kGroupMaxEps) {
    std::memset(y, 0, sizeof(BlockQ6_K));
    y->d = f32_to_f16(0.f);
    return;
  }
  const float iscale = -128.f / max_scale;
  y->d = f32_to_f16(1 / iscale);
  for (int ib = 0; ib < kQK_K / 16; ++ib) {
    y->scales[ib] = static_cast<int8_t>(std::min(127, nearest_int(iscale * scales[ib])));
  }
  for (int j = 0; j < kQK_K / 16; ++j) {
    const float d = f16_to_f32(y->d) * y->scales[j];
    if (!d) continue;
    for (int ii = 0; ii < 16; ++ii) {
      int l = nearest_int(x[16 * j + ii] / d);
      l = std::max(-32, std::min(31, l));
      L[16 * j + ii] = static_cast<int8_t>(l + 32);
    }
  }
  uint8_t* ql = y->ql;
  uint8_t* qh = y->qh;
  for (int j = 0; j < kQK_K; j += 128) {
    for (int l = 0; l < 32; ++l) {
      const uint8_t q1 = L[j + l + 0] & 0xF;
      const uint8_t q2 = L[j + l + 32] & 0xF;
      const uint8_t q3 = L[j + l + 64] & 0xF;
      const uint8_t q4 = L[j + l + 96] & 0xF;
      ql[l + 0] = static_cast<uint8_t>(q1 | (q3 << 4));
      ql[l + 32] = static_cast<uint8_t>(q2 | (q4 << 4));
      qh[l] = static_cast<uint8_t>((L[j + l] >> 4) | ((L[j + l + 32] >> 4) << 2) |
                                   ((L[j + l + 64] >> 4) << 4) | ((L[j + l + 96] >> 4) << 6));
    }
    ql += 64;
    qh += 32;
  }
}

// Row loop of the imatrix paths, calling block_fn(block_src, block_dst, block_index_in_row)
// (the reference paths treat all rows as one long row, as ggml does).
template <class Block, class F>
size_t per_row(DType t, const float* src, void* dst, int64_t nrows, int64_t n_per_row, F&& block_fn) {
  return for_each_row<Block>(t, src, dst, nrows, n_per_row, [&](const float* x, Block* y) {
    for (int64_t i = 0; i < n_per_row / kQK_K; ++i) block_fn(x + i * kQK_K, y + i, i);
  });
}

}  // namespace

// ---------------------------------------------------------------- Q2_K

void quantize_row_q2_K_ref(const float* x, BlockQ2_K* y, int64_t n) {
  const int64_t nb = n / kQK_K;
  uint8_t L[kQK_K];
  uint8_t Laux[16];
  float weights[16];
  float mins[kQK_K / 16];
  float scales[kQK_K / 16];
  const float q4scale = 15.f;
  for (int64_t i = 0; i < nb; ++i) {
    float max_scale = 0;  // as the min is subtracted, scales are always positive
    float max_min = 0;
    for (int j = 0; j < kQK_K / 16; ++j) {
      for (int l = 0; l < 16; ++l) weights[l] = std::fabs(x[16 * j + l]);
      scales[j] =
          make_qkx2_quants(16, 3, x + 16 * j, weights, L + 16 * j, &mins[j], Laux, -0.5f, 0.1f, 15, true);
      if (scales[j] > max_scale) max_scale = scales[j];
      if (mins[j] > max_min) max_min = mins[j];
    }
    if (max_scale > 0) {
      const float iscale = q4scale / max_scale;
      for (int j = 0; j < kQK_K / 16; ++j)
        y[i].scales[j] = static_cast<uint8_t>(nearest_int(iscale * scales[j]));
      y[i].d = f32_to_f16(max_scale / q4scale);
    } else {
      for (int j = 0; j < kQK_K / 16; ++j) y[i].scales[j] = 0;
      y[i].d = f32_to_f16(0.f);
    }
    if (max_min > 0) {
      const float iscale = q4scale / max_min;
      for (int j = 0; j < kQK_K / 16; ++j) {
        const int l = nearest_int(iscale * mins[j]);
        y[i].scales[j] |= static_cast<uint8_t>(l << 4);
      }
      y[i].dmin = f32_to_f16(max_min / q4scale);
    } else {
      y[i].dmin = f32_to_f16(0.f);
    }
    q2_K_requantize_and_pack(x, &y[i], L);
    x += kQK_K;
  }
}

void dequantize_row_q2_K(const BlockQ2_K* x, float* y, int64_t n) {
  const int64_t nb = n / kQK_K;
  for (int64_t i = 0; i < nb; ++i) {
    const float d = f16_to_f32(x[i].d);
    const float min = f16_to_f32(x[i].dmin);
    const uint8_t* q = x[i].qs;
    int is = 0;
    for (int nn = 0; nn < kQK_K; nn += 128) {
      int shift = 0;
      for (int j = 0; j < 4; ++j) {
        uint8_t sc = x[i].scales[is++];
        float dl = d * (sc & 0xF);
        float ml = min * (sc >> 4);
        for (int l = 0; l < 16; ++l) *y++ = dl * static_cast<int8_t>((q[l] >> shift) & 3) - ml;
        sc = x[i].scales[is++];
        dl = d * (sc & 0xF);
        ml = min * (sc >> 4);
        for (int l = 0; l < 16; ++l) *y++ = dl * static_cast<int8_t>((q[l + 16] >> shift) & 3) - ml;
        shift += 2;
      }
      q += 32;
    }
  }
}

size_t quantize_q2_K(const float* src, void* dst, int64_t nrows, int64_t n_per_row, const float* qw) {
  if (!qw) {
    quantize_row_q2_K_ref(src, static_cast<BlockQ2_K*>(dst), nrows * n_per_row);
    return static_cast<size_t>(nrows) * row_size(DType::Q2_K, n_per_row);
  }
  return per_row<BlockQ2_K>(DType::Q2_K, src, dst, nrows, n_per_row,
                            [&](const float* x, BlockQ2_K* y, int64_t i) {
                              uint8_t L[kQK_K];
                              uint8_t Laux[16];
                              float mins[kQK_K / 16];
                              float scales[kQK_K / 16];
                              float sw[kQK_K / 16] = {};
                              float weight[16];
                              uint8_t Ls[kQK_K / 16], Lm[kQK_K / 16];
                              float sumx2 = 0;
                              for (int j = 0; j < kQK_K; ++j) sumx2 += x[j] * x[j];
                              const float sigma2 = sumx2 / kQK_K;
                              for (int j = 0; j < kQK_K / 16; ++j) {
                                const float* q = qw + kQK_K * i + 16 * j;
                                for (int l = 0; l < 16; ++l)
                                  weight[l] = q[l] * std::sqrt(sigma2 + x[16 * j + l] * x[16 * j + l]);
                                for (int l = 0; l < kQK_K / 16; ++l) sw[j] += weight[l];
                                scales[j] = make_qkx3_quants(16, 3, x + 16 * j, weight, L + 16 * j, &mins[j],
                                                             Laux, -0.9f, 0.05f, 36, false);
                              }
                              const float dm = make_qp_quants(kQK_K / 16, 15, scales, Ls, sw);
                              const float mm = make_qp_quants(kQK_K / 16, 15, mins, Lm, sw);
                              y->d = f32_to_f16(dm);
                              y->dmin = f32_to_f16(mm);
                              for (int j = 0; j < kQK_K / 16; ++j)
                                y->scales[j] = static_cast<uint8_t>(Ls[j] | (Lm[j] << 4));
                              q2_K_requantize_and_pack(x, y, L);
                            });
}

// ---------------------------------------------------------------- Q3_K

void quantize_row_q3_K_ref(const float* x, BlockQ3_K* y, int64_t n) {
  const int64_t nb = n / kQK_K;
  int8_t L[kQK_K];
  float scales[kQK_K / 16];
  for (int64_t i = 0; i < nb; ++i) {
    float max_scale = 0;
    float amax = 0;
    for (int j = 0; j < kQK_K / 16; ++j) {
      scales[j] = make_q3_quants(16, 4, x + 16 * j, L + 16 * j, true);
      const float scale = std::fabs(scales[j]);
      if (scale > amax) {
        amax = scale;
        max_scale = scales[j];
      }
    }
    std::memset(y[i].scales, 0, 12);
    if (max_scale) {
      const float iscale = -32.f / max_scale;
      for (int j = 0; j < kQK_K / 16; ++j) {
        int8_t l = static_cast<int8_t>(nearest_int(iscale * scales[j]));
        l = static_cast<int8_t>(std::max(-32, std::min(31, static_cast<int>(l))) + 32);
        set_scale_q3(j, l, y[i].scales);
      }
      y[i].d = f32_to_f16(1 / iscale);
    } else {
      y[i].d = f32_to_f16(0.f);
    }
    q3_K_requantize_and_pack(x, &y[i], L);
    x += kQK_K;
  }
}

void dequantize_row_q3_K(const BlockQ3_K* x, float* y, int64_t n) {
  const int64_t nb = n / kQK_K;
  const uint32_t kmask1 = 0x03030303;
  const uint32_t kmask2 = 0x0f0f0f0f;
  uint32_t aux[4];
  for (int64_t i = 0; i < nb; ++i) {
    const float d_all = f16_to_f32(x[i].d);
    const uint8_t* q = x[i].qs;
    const uint8_t* hm = x[i].hmask;
    uint8_t m = 1;
    std::memcpy(aux, x[i].scales, 12);
    const uint32_t tmp = aux[2];
    aux[2] = ((aux[0] >> 4) & kmask2) | (((tmp >> 4) & kmask1) << 4);
    aux[3] = ((aux[1] >> 4) & kmask2) | (((tmp >> 6) & kmask1) << 4);
    aux[0] = (aux[0] & kmask2) | (((tmp >> 0) & kmask1) << 4);
    aux[1] = (aux[1] & kmask2) | (((tmp >> 2) & kmask1) << 4);
    int8_t scales[16];
    std::memcpy(scales, aux, 16);
    int is = 0;
    for (int nn = 0; nn < kQK_K; nn += 128) {
      int shift = 0;
      for (int j = 0; j < 4; ++j) {
        float dl = d_all * (scales[is++] - 32);
        for (int l = 0; l < 16; ++l) {
          *y++ = dl * (static_cast<int8_t>((q[l + 0] >> shift) & 3) - ((hm[l + 0] & m) ? 0 : 4));
        }
        dl = d_all * (scales[is++] - 32);
        for (int l = 0; l < 16; ++l) {
          *y++ = dl * (static_cast<int8_t>((q[l + 16] >> shift) & 3) - ((hm[l + 16] & m) ? 0 : 4));
        }
        shift += 2;
        m = static_cast<uint8_t>(m << 1);
      }
      q += 32;
    }
  }
}

size_t quantize_q3_K(const float* src, void* dst, int64_t nrows, int64_t n_per_row, const float* qw) {
  if (!qw) {
    quantize_row_q3_K_ref(src, static_cast<BlockQ3_K*>(dst), nrows * n_per_row);
    return static_cast<size_t>(nrows) * row_size(DType::Q3_K, n_per_row);
  }
  return per_row<BlockQ3_K>(DType::Q3_K, src, dst, nrows, n_per_row,
                            [&](const float* x, BlockQ3_K* y, int64_t i) {
                              int8_t L[kQK_K];
                              float scales[kQK_K / 16];
                              float weight[16];
                              float sw[kQK_K / 16];
                              int8_t Ls[kQK_K / 16];
                              float sumx2 = 0;
                              for (int j = 0; j < kQK_K; ++j) sumx2 += x[j] * x[j];
                              const float sigma2 = 2 * sumx2 / kQK_K;
                              for (int j = 0; j < kQK_K / 16; ++j) {
                                const float* q = qw + kQK_K * i + 16 * j;
                                for (int l = 0; l < 16; ++l)
                                  weight[l] = q[l] * std::sqrt(sigma2 + x[16 * j + l] * x[16 * j + l]);
                                float sumw = 0;
                                for (int l = 0; l < 16; ++l) sumw += weight[l];
                                sw[j] = sumw;
                                scales[j] = make_qx_quants(16, 4, x + 16 * j, L + 16 * j, 1, weight);
                              }
                              std::memset(y->scales, 0, 12);
                              const float d_block = make_qx_quants(kQK_K / 16, 32, scales, Ls, 1, sw);
                              for (int j = 0; j < kQK_K / 16; ++j) set_scale_q3(j, Ls[j], y->scales);
                              y->d = f32_to_f16(d_block);
                              q3_K_requantize_and_pack(x, y, L);
                            });
}

// ---------------------------------------------------------------- Q4_K

void quantize_row_q4_K_ref(const float* x, BlockQ4_K* y, int64_t n) {
  uint8_t L[kQK_K];
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    quantize_qk_ref_block(x + i * kQK_K, &y[i], 15, -1.f, 0.1f, 20, L);
    pack_q4_K(L, &y[i]);
  }
}

void dequantize_row_q4_K(const BlockQ4_K* x, float* y, int64_t n) {
  const int64_t nb = n / kQK_K;
  for (int64_t i = 0; i < nb; ++i) {
    const uint8_t* q = x[i].qs;
    const float d = f16_to_f32(x[i].d);
    const float min = f16_to_f32(x[i].dmin);
    int is = 0;
    uint8_t sc, m;
    for (int j = 0; j < kQK_K; j += 64) {
      get_scale_min_k4(is + 0, x[i].scales, &sc, &m);
      const float d1 = d * sc;
      const float m1 = min * m;
      get_scale_min_k4(is + 1, x[i].scales, &sc, &m);
      const float d2 = d * sc;
      const float m2 = min * m;
      for (int l = 0; l < 32; ++l) *y++ = d1 * (q[l] & 0xF) - m1;
      for (int l = 0; l < 32; ++l) *y++ = d2 * (q[l] >> 4) - m2;
      q += 32;
      is += 2;
    }
  }
}

size_t quantize_q4_K(const float* src, void* dst, int64_t nrows, int64_t n_per_row, const float* qw) {
  if (!qw) {
    quantize_row_q4_K_ref(src, static_cast<BlockQ4_K*>(dst), nrows * n_per_row);
    return static_cast<size_t>(nrows) * row_size(DType::Q4_K, n_per_row);
  }
  return per_row<BlockQ4_K>(DType::Q4_K, src, dst, nrows, n_per_row,
                            [&](const float* x, BlockQ4_K* y, int64_t i) {
                              uint8_t L[kQK_K];
                              quantize_qk_impl_block(x, y, 15, qw + kQK_K * i, L);
                              pack_q4_K(L, y);
                            });
}

// ---------------------------------------------------------------- Q5_K

void quantize_row_q5_K_ref(const float* x, BlockQ5_K* y, int64_t n) {
  uint8_t L[kQK_K];
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    quantize_qk_ref_block(x + i * kQK_K, &y[i], 31, -0.5f, 0.1f, 15, L);
    pack_q5_K(L, &y[i]);
  }
}

void dequantize_row_q5_K(const BlockQ5_K* x, float* y, int64_t n) {
  const int64_t nb = n / kQK_K;
  for (int64_t i = 0; i < nb; ++i) {
    const uint8_t* ql = x[i].qs;
    const uint8_t* qh = x[i].qh;
    const float d = f16_to_f32(x[i].d);
    const float min = f16_to_f32(x[i].dmin);
    int is = 0;
    uint8_t sc, m;
    uint8_t u1 = 1, u2 = 2;
    for (int j = 0; j < kQK_K; j += 64) {
      get_scale_min_k4(is + 0, x[i].scales, &sc, &m);
      const float d1 = d * sc;
      const float m1 = min * m;
      get_scale_min_k4(is + 1, x[i].scales, &sc, &m);
      const float d2 = d * sc;
      const float m2 = min * m;
      for (int l = 0; l < 32; ++l) *y++ = d1 * ((ql[l] & 0xF) + (qh[l] & u1 ? 16 : 0)) - m1;
      for (int l = 0; l < 32; ++l) *y++ = d2 * ((ql[l] >> 4) + (qh[l] & u2 ? 16 : 0)) - m2;
      ql += 32;
      is += 2;
      u1 = static_cast<uint8_t>(u1 << 2);
      u2 = static_cast<uint8_t>(u2 << 2);
    }
  }
}

size_t quantize_q5_K(const float* src, void* dst, int64_t nrows, int64_t n_per_row, const float* qw) {
  if (!qw) {
    quantize_row_q5_K_ref(src, static_cast<BlockQ5_K*>(dst), nrows * n_per_row);
    return static_cast<size_t>(nrows) * row_size(DType::Q5_K, n_per_row);
  }
  return per_row<BlockQ5_K>(DType::Q5_K, src, dst, nrows, n_per_row,
                            [&](const float* x, BlockQ5_K* y, int64_t i) {
                              uint8_t L[kQK_K];
                              quantize_qk_impl_block(x, y, 31, qw + kQK_K * i, L);
                              pack_q5_K(L, y);
                            });
}

// ---------------------------------------------------------------- Q6_K

void quantize_row_q6_K_ref(const float* x, BlockQ6_K* y, int64_t n) {
  for (int64_t i = 0; i < n / kQK_K; ++i) quantize_q6_K_block(x + i * kQK_K, &y[i], nullptr);
}

void dequantize_row_q6_K(const BlockQ6_K* x, float* y, int64_t n) {
  const int64_t nb = n / kQK_K;
  for (int64_t i = 0; i < nb; ++i) {
    const float d = f16_to_f32(x[i].d);
    const uint8_t* ql = x[i].ql;
    const uint8_t* qh = x[i].qh;
    const int8_t* sc = x[i].scales;
    for (int nn = 0; nn < kQK_K; nn += 128) {
      for (int l = 0; l < 32; ++l) {
        const int is = l / 16;
        const int8_t q1 = static_cast<int8_t>(((ql[l + 0] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32);
        const int8_t q2 = static_cast<int8_t>(((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32);
        const int8_t q3 = static_cast<int8_t>(((ql[l + 0] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32);
        const int8_t q4 = static_cast<int8_t>(((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32);
        y[l + 0] = d * sc[is + 0] * q1;
        y[l + 32] = d * sc[is + 2] * q2;
        y[l + 64] = d * sc[is + 4] * q3;
        y[l + 96] = d * sc[is + 6] * q4;
      }
      y += 128;
      ql += 64;
      qh += 32;
      sc += 8;
    }
  }
}

size_t quantize_q6_K(const float* src, void* dst, int64_t nrows, int64_t n_per_row, const float* qw) {
  if (!qw) {
    quantize_row_q6_K_ref(src, static_cast<BlockQ6_K*>(dst), nrows * n_per_row);
    return static_cast<size_t>(nrows) * row_size(DType::Q6_K, n_per_row);
  }
  return per_row<BlockQ6_K>(
      DType::Q6_K, src, dst, nrows, n_per_row,
      [&](const float* x, BlockQ6_K* y, int64_t i) { quantize_q6_K_block(x, y, qw + kQK_K * i); });
}

// ---------------------------------------------------------------- Q8_K (activations)

void quantize_row_q8_K_ref(const float* x, BlockQ8_K* y, int64_t n) {
  const int64_t nb = n / kQK_K;
  for (int64_t i = 0; i < nb; ++i) {
    float max = 0;
    float amax = 0;
    for (int j = 0; j < kQK_K; ++j) {
      const float ax = std::fabs(x[j]);
      if (ax > amax) {
        amax = ax;
        max = x[j];
      }
    }
    if (!amax) {
      // ggml leaves bsums untouched here; kiln zeroes them so the block is fully defined.
      y[i].d = 0;
      std::memset(y[i].qs, 0, kQK_K);
      std::memset(y[i].bsums, 0, sizeof(y[i].bsums));
      x += kQK_K;
      continue;
    }
    const float iscale = -127.f / max;
    for (int j = 0; j < kQK_K; ++j) {
      const int v = nearest_int(iscale * x[j]);
      y[i].qs[j] = static_cast<int8_t>(std::min(127, v));
    }
    for (int j = 0; j < kQK_K / 16; ++j) {
      int sum = 0;
      for (int ii = 0; ii < 16; ++ii) sum += y[i].qs[j * 16 + ii];
      y[i].bsums[j] = static_cast<int16_t>(sum);
    }
    y[i].d = 1 / iscale;
    x += kQK_K;
  }
}

void dequantize_row_q8_K(const BlockQ8_K* x, float* y, int64_t n) {
  const int64_t nb = n / kQK_K;
  for (int64_t i = 0; i < nb; ++i) {
    for (int j = 0; j < kQK_K; ++j) *y++ = x[i].d * x[i].qs[j];
  }
}

}  // namespace kiln::quant
