// Scale searches shared by the quantizers, following ggml-quants.c exactly (names, constants and
// operation order are the specification: change nothing without checking the fixtures).
#pragma once

#include <bit>
#include <cstdint>

namespace kiln::quant {

inline constexpr float kGroupMaxEps = 1e-15f;  // ref: GROUP_MAX_EPS

// Round to nearest, ties to even, for |v| <= 4194303 (ref: nearest_int, the 1.5*2^23 trick).
inline int nearest_int(float v) {
  const float biased = v + 12582912.f;
  const int32_t i = std::bit_cast<int32_t>(biased);
  return (i & 0x007fffff) - 0x00400000;
}

// 6-bit scale and min j (0..7) of a Q4_K/Q5_K block. ref: get_scale_min_k4
inline void get_scale_min_k4(int j, const uint8_t* q, uint8_t* d, uint8_t* m) {
  if (j < 4) {
    *d = q[j] & 63;
    *m = q[j + 4] & 63;
  } else {
    *d = (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4);
    *m = (q[j + 4] >> 4) | ((q[j - 0] >> 6) << 4);
  }
}

// Symmetric levels L[i] in [0, 2*nmax) with x ~ scale * (L - nmax); returns scale.
// rmse_type 0: plain rounding; 1..4: weighted search (weights qw, or x^2, 1, |x|, sqrt|x|);
// negative: one weighted refinement and return. ref: make_qx_quants
float make_qx_quants(int n, int nmax, const float* x, int8_t* L, int rmse_type, const float* qw);
// As make_qx_quants for Q3_K's reference path (x^2 weights, coordinate descent). ref: make_q3_quants
float make_q3_quants(int n, int nmax, const float* x, int8_t* L, bool do_rmse);
// Asymmetric levels L[i] in [0, nmax] with x ~ scale * L - the_min. ref: make_qkx2_quants
float make_qkx2_quants(int n, int nmax, const float* x, const float* weights, uint8_t* L, float* the_min,
                       uint8_t* Laux, float rmin, float rdelta, int nstep, bool use_mad);
// As make_qkx2_quants; weights may be null (then x^2). ref: make_qkx3_quants
float make_qkx3_quants(int n, int nmax, const float* x, const float* weights, uint8_t* L, float* the_min,
                       uint8_t* Laux, float rmin, float rdelta, int nstep, bool use_mad);
// Non-negative levels L[i] in [0, nmax] for x >= 0 (super-block scales). ref: make_qp_quants
float make_qp_quants(int n, int nmax, const float* x, uint8_t* L, const float* quant_weights);

}  // namespace kiln::quant
