// Scalar reference dot products of each weight format with its activation format. Integer sums
// inside a block are exact; the float steps follow ggml's generic kernels (ggml-cpu/quants.c),
// so SIMD variants (which reassociate the float sums) agree to float rounding.
#include <cstring>

#include "core/half.h"
#include "ops/quant/kernels.h"
#include "ops/quant/search.h"

namespace kiln::quant {
namespace {

// Unpacks the 16 signed 6-bit scales of a Q3_K block (already minus 32).
inline void q3_K_scales(const uint8_t* packed, int8_t* scales) {
  const uint32_t kmask1 = 0x03030303, kmask2 = 0x0f0f0f0f;
  uint32_t aux[4];
  std::memcpy(aux, packed, 12);
  const uint32_t tmp = aux[2];
  aux[2] = ((aux[0] >> 4) & kmask2) | (((tmp >> 4) & kmask1) << 4);
  aux[3] = ((aux[1] >> 4) & kmask2) | (((tmp >> 6) & kmask1) << 4);
  aux[0] = (aux[0] & kmask2) | (((tmp >> 0) & kmask1) << 4);
  aux[1] = (aux[1] & kmask2) | (((tmp >> 2) & kmask1) << 4);
  std::memcpy(scales, aux, 16);
  for (int j = 0; j < 16; ++j) scales[j] = static_cast<int8_t>(scales[j] - 32);
}

inline int dot_i8(const int8_t* a, const int8_t* b, int n) {
  int s = 0;
  for (int l = 0; l < n; ++l) s += a[l] * b[l];
  return s;
}

}  // namespace

void vec_dot_q4_0_q8_0(int64_t n, float* s, const BlockQ4_0* x, const BlockQ8_0* y) {
  float sumf = 0;
  for (int64_t ib = 0; ib < n / kQK8_0; ++ib) {
    int sumi0 = 0, sumi1 = 0;
    for (int j = 0; j < kQK8_0 / 2; ++j) {
      const int v0 = (x[ib].qs[j] & 0x0F) - 8;
      const int v1 = (x[ib].qs[j] >> 4) - 8;
      sumi0 += v0 * y[ib].qs[j];
      sumi1 += v1 * y[ib].qs[j + kQK8_0 / 2];
    }
    const int sumi = sumi0 + sumi1;
    sumf += sumi * f16_to_f32(x[ib].d) * f16_to_f32(y[ib].d);
  }
  *s = sumf;
}

void vec_dot_q4_1_q8_1(int64_t n, float* s, const BlockQ4_1* x, const BlockQ8_1* y) {
  float sumf = 0;
  for (int64_t ib = 0; ib < n / kQK8_1; ++ib) {
    int sumi0 = 0, sumi1 = 0;
    for (int j = 0; j < kQK8_1 / 2; ++j) {
      const int v0 = x[ib].qs[j] & 0x0F;
      const int v1 = x[ib].qs[j] >> 4;
      sumi0 += v0 * y[ib].qs[j];
      sumi1 += v1 * y[ib].qs[j + kQK8_1 / 2];
    }
    const int sumi = sumi0 + sumi1;
    sumf += (f16_to_f32(x[ib].d) * f16_to_f32(y[ib].d)) * sumi + f16_to_f32(x[ib].m) * f16_to_f32(y[ib].s);
  }
  *s = sumf;
}

void vec_dot_q5_0_q8_0(int64_t n, float* s, const BlockQ5_0* x, const BlockQ8_0* y) {
  float sumf = 0;
  for (int64_t ib = 0; ib < n / kQK8_0; ++ib) {
    uint32_t qh;
    std::memcpy(&qh, x[ib].qh, sizeof(qh));
    int sumi0 = 0, sumi1 = 0;
    for (int j = 0; j < kQK8_0 / 2; ++j) {
      const uint8_t xh_0 = static_cast<uint8_t>(((qh & (1u << (j + 0))) >> (j + 0)) << 4);
      const uint8_t xh_1 = static_cast<uint8_t>((qh & (1u << (j + 16))) >> (j + 12));
      const int32_t x0 = static_cast<int8_t>(((x[ib].qs[j] & 0x0F) | xh_0) - 16);
      const int32_t x1 = static_cast<int8_t>(((x[ib].qs[j] >> 4) | xh_1) - 16);
      sumi0 += x0 * y[ib].qs[j];
      sumi1 += x1 * y[ib].qs[j + kQK8_0 / 2];
    }
    const int sumi = sumi0 + sumi1;
    sumf += (f16_to_f32(x[ib].d) * f16_to_f32(y[ib].d)) * sumi;
  }
  *s = sumf;
}

void vec_dot_q5_1_q8_1(int64_t n, float* s, const BlockQ5_1* x, const BlockQ8_1* y) {
  float sumf = 0;
  for (int64_t ib = 0; ib < n / kQK8_1; ++ib) {
    uint32_t qh;
    std::memcpy(&qh, x[ib].qh, sizeof(qh));
    int sumi0 = 0, sumi1 = 0;
    for (int j = 0; j < kQK8_1 / 2; ++j) {
      const uint8_t xh_0 = static_cast<uint8_t>(((qh >> (j + 0)) << 4) & 0x10);
      const uint8_t xh_1 = static_cast<uint8_t>(((qh >> (j + 12))) & 0x10);
      const int32_t x0 = (x[ib].qs[j] & 0xF) | xh_0;
      const int32_t x1 = (x[ib].qs[j] >> 4) | xh_1;
      sumi0 += x0 * y[ib].qs[j];
      sumi1 += x1 * y[ib].qs[j + kQK8_1 / 2];
    }
    const int sumi = sumi0 + sumi1;
    sumf += (f16_to_f32(x[ib].d) * f16_to_f32(y[ib].d)) * sumi + f16_to_f32(x[ib].m) * f16_to_f32(y[ib].s);
  }
  *s = sumf;
}

void vec_dot_q8_0_q8_0(int64_t n, float* s, const BlockQ8_0* x, const BlockQ8_0* y) {
  float sumf = 0;
  for (int64_t ib = 0; ib < n / kQK8_0; ++ib) {
    const int sumi = dot_i8(x[ib].qs, y[ib].qs, kQK8_0);
    sumf += sumi * (f16_to_f32(x[ib].d) * f16_to_f32(y[ib].d));
  }
  *s = sumf;
}

void vec_dot_iq4_nl_q8_0(int64_t n, float* s, const BlockIQ4NL* x, const BlockQ8_0* y) {
  float sumf = 0;
  for (int64_t ib = 0; ib < n / kQK4_NL; ++ib) {
    const float d = f16_to_f32(y[ib].d) * f16_to_f32(x[ib].d);
    int sumi1 = 0, sumi2 = 0;
    for (int j = 0; j < kQK4_NL / 2; ++j) {
      sumi1 += y[ib].qs[j + 0] * kValuesIQ4NL[x[ib].qs[j] & 0xf];
      sumi2 += y[ib].qs[j + kQK4_NL / 2] * kValuesIQ4NL[x[ib].qs[j] >> 4];
    }
    sumf += d * (sumi1 + sumi2);
  }
  *s = sumf;
}

// ggml's generic order: per sub-block of 32, one float multiply-add of the scaled integer sum.
void vec_dot_iq4_xs_q8_K(int64_t n, float* s, const BlockIQ4XS* x, const BlockQ8_K* y) {
  float sumf = 0;
  for (int64_t ibl = 0; ibl < n / kQK_K; ++ibl) {
    const float d4d8 = f16_to_f32(x[ibl].d) * y[ibl].d;
    const uint8_t* qs = x[ibl].qs;
    const int8_t* q8 = y[ibl].qs;
    for (int ib = 0; ib < kQK_K / 32; ++ib) {
      const float dl = d4d8 * static_cast<float>(iq4_xs_scale(x[ibl], ib));
      int sumi1 = 0, sumi2 = 0;
      for (int j = 0; j < 16; ++j) {
        sumi1 += q8[j + 0] * kValuesIQ4NL[qs[j] & 0xf];
        sumi2 += q8[j + 16] * kValuesIQ4NL[qs[j] >> 4];
      }
      sumf += dl * static_cast<float>(sumi1 + sumi2);
      qs += 16;
      q8 += 32;
    }
  }
  *s = sumf;
}

void vec_dot_q2_K_q8_K(int64_t n, float* s, const BlockQ2_K* x, const BlockQ8_K* y) {
  float sumf = 0;
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    const uint8_t* q2 = x[i].qs;
    const int8_t* q8 = y[i].qs;
    const uint8_t* sc = x[i].scales;
    int summs = 0;
    for (int j = 0; j < 16; ++j) summs += y[i].bsums[j] * (sc[j] >> 4);
    const float dall = y[i].d * f16_to_f32(x[i].d);
    const float dmin = y[i].d * f16_to_f32(x[i].dmin);
    int isum = 0;
    int is = 0;
    for (int k = 0; k < kQK_K / 128; ++k) {
      int shift = 0;
      for (int j = 0; j < 4; ++j) {
        int d = sc[is++] & 0xF;
        int isuml = 0;
        for (int l = 0; l < 16; ++l) isuml += q8[l] * ((q2[l] >> shift) & 3);
        isum += d * isuml;
        d = sc[is++] & 0xF;
        isuml = 0;
        for (int l = 16; l < 32; ++l) isuml += q8[l] * ((q2[l] >> shift) & 3);
        isum += d * isuml;
        shift += 2;
        q8 += 32;
      }
      q2 += 32;
    }
    sumf += dall * isum - dmin * summs;
  }
  *s = sumf;
}

void vec_dot_q3_K_q8_K(int64_t n, float* s, const BlockQ3_K* x, const BlockQ8_K* y) {
  float sumf = 0;
  int8_t aux8[kQK_K];
  int8_t scales[16];
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    const uint8_t* q3 = x[i].qs;
    const uint8_t* hm = x[i].hmask;
    int8_t* a = aux8;
    uint8_t m = 1;
    for (int j = 0; j < kQK_K; j += 128) {
      for (int shift = 0; shift < 8; shift += 2) {
        for (int l = 0; l < 32; ++l)
          a[l] = static_cast<int8_t>(((q3[l] >> shift) & 3) - ((hm[l] & m) ? 0 : 4));
        a += 32;
        m = static_cast<uint8_t>(m << 1);
      }
      q3 += 32;
    }
    q3_K_scales(x[i].scales, scales);
    int isum = 0;
    for (int j = 0; j < 16; ++j) isum += scales[j] * dot_i8(aux8 + 16 * j, y[i].qs + 16 * j, 16);
    const float d = f16_to_f32(x[i].d) * y[i].d;
    sumf += d * isum;
  }
  *s = sumf;
}

void vec_dot_q4_K_q8_K(int64_t n, float* s, const BlockQ4_K* x, const BlockQ8_K* y) {
  float sumf = 0;
  int8_t aux8[kQK_K];
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    const uint8_t* q4 = x[i].qs;
    int8_t* a = aux8;
    for (int j = 0; j < kQK_K / 64; ++j) {
      for (int l = 0; l < 32; ++l) a[l] = static_cast<int8_t>(q4[l] & 0xF);
      a += 32;
      for (int l = 0; l < 32; ++l) a[l] = static_cast<int8_t>(q4[l] >> 4);
      a += 32;
      q4 += 32;
    }
    int isum = 0, summs = 0;
    for (int j = 0; j < kQK_K / 32; ++j) {
      uint8_t sc, m;
      get_scale_min_k4(j, x[i].scales, &sc, &m);
      isum += sc * dot_i8(aux8 + 32 * j, y[i].qs + 32 * j, 32);
      summs += m * (y[i].bsums[2 * j] + y[i].bsums[2 * j + 1]);
    }
    const float d = f16_to_f32(x[i].d) * y[i].d;
    const float dmin = f16_to_f32(x[i].dmin) * y[i].d;
    sumf += d * isum - dmin * summs;
  }
  *s = sumf;
}

void vec_dot_q5_K_q8_K(int64_t n, float* s, const BlockQ5_K* x, const BlockQ8_K* y) {
  float sumf = 0;
  int8_t aux8[kQK_K];
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    const uint8_t* q4 = x[i].qs;
    const uint8_t* hm = x[i].qh;
    int8_t* a = aux8;
    uint8_t m = 1;
    for (int j = 0; j < kQK_K / 64; ++j) {
      for (int l = 0; l < 32; ++l) a[l] = static_cast<int8_t>((q4[l] & 0xF) + (hm[l] & m ? 16 : 0));
      a += 32;
      m = static_cast<uint8_t>(m << 1);
      for (int l = 0; l < 32; ++l) a[l] = static_cast<int8_t>((q4[l] >> 4) + (hm[l] & m ? 16 : 0));
      a += 32;
      m = static_cast<uint8_t>(m << 1);
      q4 += 32;
    }
    int isum = 0, summs = 0;
    for (int j = 0; j < kQK_K / 32; ++j) {
      uint8_t sc, mn;
      get_scale_min_k4(j, x[i].scales, &sc, &mn);
      isum += sc * dot_i8(aux8 + 32 * j, y[i].qs + 32 * j, 32);
      summs += mn * (y[i].bsums[2 * j] + y[i].bsums[2 * j + 1]);
    }
    const float d = f16_to_f32(x[i].d) * y[i].d;
    const float dmin = f16_to_f32(x[i].dmin) * y[i].d;
    sumf += d * isum - dmin * summs;
  }
  *s = sumf;
}

void vec_dot_q6_K_q8_K(int64_t n, float* s, const BlockQ6_K* x, const BlockQ8_K* y) {
  float sumf = 0;
  int8_t aux8[kQK_K];
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    const uint8_t* q4 = x[i].ql;
    const uint8_t* qh = x[i].qh;
    int8_t* a = aux8;
    for (int j = 0; j < kQK_K; j += 128) {
      for (int l = 0; l < 32; ++l) {
        a[l + 0] = static_cast<int8_t>(((q4[l + 0] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32);
        a[l + 32] = static_cast<int8_t>(((q4[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32);
        a[l + 64] = static_cast<int8_t>(((q4[l + 0] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32);
        a[l + 96] = static_cast<int8_t>(((q4[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32);
      }
      a += 128;
      q4 += 64;
      qh += 32;
    }
    int isum = 0;
    for (int j = 0; j < 16; ++j) isum += x[i].scales[j] * dot_i8(aux8 + 16 * j, y[i].qs + 16 * j, 16);
    const float d = f16_to_f32(x[i].d) * y[i].d;
    sumf += d * isum;
  }
  *s = sumf;
}

namespace {

// Double accumulation of the products in index order, each product rounded to float.
template <class Pos, class T, class Widen>
float dot_double(int64_t n, const T* x, const T* y, Pos at, Widen widen) {
  double sumf = 0.0;
  for (int64_t i = 0; i < n; ++i) sumf += static_cast<double>(widen(x[at(i)]) * widen(y[at(i)]));
  return static_cast<float>(sumf);
}

float widen_f32(float v) { return v; }

}  // namespace

void vec_dot_f16(int64_t n, float* s, const uint16_t* x, const uint16_t* y) {
  *s = dot_double(n, x, y, PlainPos{}, f16_to_f32);
}
void vec_dot_bf16(int64_t n, float* s, const uint16_t* x, const uint16_t* y) {
  *s = dot_double(n, x, y, PlainPos{}, bf16_to_f32);
}
void vec_dot_f32(int64_t n, float* s, const float* x, const float* y) {
  *s = dot_double(n, x, y, PlainPos{}, widen_f32);
}
void vec_dot_f16_split16(int64_t n, float* s, const uint16_t* x, const uint16_t* y) {
  *s = dot_double(n, x, y, Split16Pos{n}, f16_to_f32);
}
void vec_dot_bf16_split16(int64_t n, float* s, const uint16_t* x, const uint16_t* y) {
  *s = dot_double(n, x, y, Split16Pos{n}, bf16_to_f32);
}
void vec_dot_f32_split16(int64_t n, float* s, const float* x, const float* y) {
  *s = dot_double(n, x, y, Split16Pos{n}, widen_f32);
}

}  // namespace kiln::quant
