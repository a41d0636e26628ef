// Scalar references of the dot products in the order of ggml's x86 "repack" kernels. On AVX2 CPUs
// llama.cpp stores Q4_0, IQ4_NL and Q4_K weights with a multiple of 8 rows interleaved 8 rows at a
// time and multiplies them with ggml_gemv_* / ggml_gemm_* (ref: ggml-cpu/repack.cpp
// ggml_repack_get_optimal_repack_type; ggml-cpu/arch/x86/repack.cpp gemv_q4_b32_8x8_q8_0_lut_avx,
// gemm_q4_b32_8x8_q8_0_lut_avx, ggml_gemv_q4_K_8x8_q8_K, ggml_gemm_q4_K_8x8_q8_K). Per output those
// kernels sum each block's integer products exactly, then fold the block into one F32 accumulator
// with a single FMA: acc = fma(float(isum), d_w * d_a, acc), with the block scale product rounded
// to F32 first. Q4_K keeps a second accumulator for the mins and returns acc - acc_min.
// ggml multiplies the first (rows - rows % 4) activation rows with the gemm kernels and the rest with
// the gemv ones. For Q4_0 and IQ4_NL both perform the same float operations per output; for Q4_K
// the gemm kernels fold every pair of sub-blocks (64 values) with its own FMA instead of the whole
// super-block (vec_dot_q4_K_q8_K_rows8_x4). The gemm activation quantizers
// (ggml_quantize_mat_q8_0_4x8 / _q8_K_4x8) round as quantize_row_q8_0 / quantize_row_q8_K do, so a
// row-at-a-time dot product reproduces both kernels.
//
// std::fma is exact (a single rounding) on every CPU; the AVX2 variants (vec_dot_avx2.cpp) must
// give bit-identical results, which tests/quant checks.
#include <cmath>

#include "core/half.h"
#include "ops/quant/kernels.h"
#include "ops/quant/search.h"

namespace kiln::quant {

void vec_dot_q4_0_q8_0_rows8(int64_t n, float* s, const BlockQ4_0* x, const BlockQ8_0* y) {
  float acc = 0.0f;
  for (int64_t ib = 0; ib < n / kQK8_0; ++ib) {
    int isum = 0;
    for (int j = 0; j < kQK8_0 / 2; ++j) {
      isum += ((x[ib].qs[j] & 0x0F) - 8) * y[ib].qs[j];
      isum += ((x[ib].qs[j] >> 4) - 8) * y[ib].qs[j + kQK8_0 / 2];
    }
    acc = std::fma(static_cast<float>(isum), f16_to_f32(x[ib].d) * f16_to_f32(y[ib].d), acc);
  }
  *s = acc;
}

void vec_dot_iq4_nl_q8_0_rows8(int64_t n, float* s, const BlockIQ4NL* x, const BlockQ8_0* y) {
  float acc = 0.0f;
  for (int64_t ib = 0; ib < n / kQK4_NL; ++ib) {
    int isum = 0;
    for (int j = 0; j < kQK4_NL / 2; ++j) {
      isum += kValuesIQ4NL[x[ib].qs[j] & 0x0F] * y[ib].qs[j];
      isum += kValuesIQ4NL[x[ib].qs[j] >> 4] * y[ib].qs[j + kQK4_NL / 2];
    }
    acc = std::fma(static_cast<float>(isum), f16_to_f32(x[ib].d) * f16_to_f32(y[ib].d), acc);
  }
  *s = acc;
}

void vec_dot_q4_K_q8_K_rows8(int64_t n, float* s, const BlockQ4_K* x, const BlockQ8_K* y) {
  float acc = 0.0f, acc_min = 0.0f;
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    int isum = 0, imin = 0;
    for (int j = 0; j < kQK_K / 32; ++j) {
      uint8_t sc, m;
      get_scale_min_k4(j, x[i].scales, &sc, &m);
      // Sub-block j: low nibbles of bytes 32*(j/2).. for even j, high nibbles for odd j.
      const uint8_t* q4 = x[i].qs + 32 * (j / 2);
      const int shift = (j % 2) * 4;
      const int8_t* q8 = y[i].qs + 32 * j;
      int dot = 0;
      for (int l = 0; l < 32; ++l) dot += ((q4[l] >> shift) & 0x0F) * q8[l];
      isum += sc * dot;
      imin += m * (y[i].bsums[2 * j] + y[i].bsums[2 * j + 1]);
    }
    acc = std::fma(static_cast<float>(isum), f16_to_f32(x[i].d) * y[i].d, acc);
    acc_min = std::fma(static_cast<float>(imin), f16_to_f32(x[i].dmin) * y[i].d, acc_min);
  }
  *s = acc - acc_min;
}

// ref: ggml_gemm_q4_K_8x8_q8_K (x86): one FMA per 64 values for the scales and one for the mins.
void vec_dot_q4_K_q8_K_rows8_x4(int64_t n, float* s, const BlockQ4_K* x, const BlockQ8_K* y) {
  float acc = 0.0f, acc_min = 0.0f;
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    const float d = f16_to_f32(x[i].d) * y[i].d;
    const float dmin = f16_to_f32(x[i].dmin) * y[i].d;
    for (int sb = 0; sb < kQK_K / 64; ++sb) {
      int isum = 0, imin = 0;
      for (int j = 2 * sb; j < 2 * sb + 2; ++j) {
        uint8_t sc, m;
        get_scale_min_k4(j, x[i].scales, &sc, &m);
        const uint8_t* q4 = x[i].qs + 32 * sb;
        const int shift = (j % 2) * 4;
        const int8_t* q8 = y[i].qs + 32 * j;
        int dot = 0;
        for (int l = 0; l < 32; ++l) dot += ((q4[l] >> shift) & 0x0F) * q8[l];
        isum += sc * dot;
        imin += m * (y[i].bsums[2 * j] + y[i].bsums[2 * j + 1]);
      }
      acc = std::fma(static_cast<float>(isum), d, acc);
      acc_min = std::fma(static_cast<float>(imin), dmin, acc_min);
    }
  }
  *s = acc - acc_min;
}

}  // namespace kiln::quant
