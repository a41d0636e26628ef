// AVX-512 (F, BW, VL, VNNI) variants; callers check cpu_has_avx512_vnni().
// GCC 12's AVX-512 intrinsics start some results from _mm512_undefined_*(), which -Wmaybe-
// uninitialized reports at every use: a false positive of the headers, silenced for this file.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <cstdint>

#include "core/half.h"
#include "ops/quant/kernels.h"

namespace kiln::quant {
namespace {

// Dword m (bytes 4m..4m+3) of the 16 packed nibble bytes of eight Q4_0 blocks, one row per 32-bit
// lane: t[m] lane i = dword m of block i's qs. A 4x4 dword transpose in each 128-bit half, after
// rows i and i + 4 are paired in one register.
inline void transpose_qs_8x4(const BlockQ4_0* const b[8], __m256i t[4]) {
  __m256i r[4];
  for (int i = 0; i < 4; ++i) {
    r[i] = _mm256_inserti128_si256(
        _mm256_castsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b[i]->qs))),
        _mm_loadu_si128(reinterpret_cast<const __m128i*>(b[i + 4]->qs)), 1);
  }
  const __m256i a0 = _mm256_unpacklo_epi32(r[0], r[1]), a1 = _mm256_unpackhi_epi32(r[0], r[1]);
  const __m256i a2 = _mm256_unpacklo_epi32(r[2], r[3]), a3 = _mm256_unpackhi_epi32(r[2], r[3]);
  t[0] = _mm256_unpacklo_epi64(a0, a2);
  t[1] = _mm256_unpackhi_epi64(a0, a2);
  t[2] = _mm256_unpacklo_epi64(a1, a3);
  t[3] = _mm256_unpackhi_epi64(a1, a3);
}

inline int32_t load_i32(const int8_t* p) {
  int32_t v;
  __builtin_memcpy(&v, p, sizeof(v));
  return v;
}

}  // namespace

bool cpu_has_avx512_vnni() {
#if defined(__x86_64__) || defined(__i386__)
  static const bool has = cpu_has_avx2() && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                          __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512vnni");
  return has;
#else
  return false;
#endif
}

void vec_dot_q4_0_q8_0_rows8_8x4_avx512(int64_t n, float* s, size_t s_stride, const BlockQ4_0* x, size_t x_stride,
                                        const BlockQ8_0* y, size_t y_stride) {
  const int64_t nb = n / kQK8_0;
  const BlockQ4_0* xs[8];
  const BlockQ8_0* ys[4];
  for (int i = 0; i < 8; ++i)
    xs[i] = reinterpret_cast<const BlockQ4_0*>(reinterpret_cast<const char*>(x) + i * x_stride);
  for (int r = 0; r < 4; ++r)
    ys[r] = reinterpret_cast<const BlockQ8_0*>(reinterpret_cast<const char*>(y) + r * y_stride);
  // As vec_dot_q4_0_q8_0_rows8_8x4_avx2: lane i of acc[r] is output (i, r), updated per block by
  // acc = fma(float(isum), d_x * d_y, acc), with isum = sum(q * y) - 8 * sum(y) from the unsigned
  // nibbles q. The nibbles are laid out one row per 32-bit lane (w[k] lane i = elements 4k..4k+3
  // of row i), so each VNNI dot product with four activation bytes broadcast to every lane adds
  // to all eight rows' sums at once, with no horizontal reduction.
  const __m256i low4 = _mm256_set1_epi8(0x0F), ones8 = _mm256_set1_epi8(1);
  __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
  for (int64_t ib = 0; ib < nb; ++ib) {
    const BlockQ4_0* blocks[8];
    for (int i = 0; i < 8; ++i) blocks[i] = xs[i] + ib;
    __m256i packed[4], w[8];
    transpose_qs_8x4(blocks, packed);
    for (int m = 0; m < 4; ++m) {
      w[m] = _mm256_and_si256(packed[m], low4);                             // elements 4m..4m+3
      w[m + 4] = _mm256_and_si256(_mm256_srli_epi16(packed[m], 4), low4);  // elements 16+4m..
    }
    const __m256 dx = _mm256_cvtph_ps(_mm_set_epi16(
        static_cast<int16_t>(blocks[7]->d), static_cast<int16_t>(blocks[6]->d), static_cast<int16_t>(blocks[5]->d),
        static_cast<int16_t>(blocks[4]->d), static_cast<int16_t>(blocks[3]->d), static_cast<int16_t>(blocks[2]->d),
        static_cast<int16_t>(blocks[1]->d), static_cast<int16_t>(blocks[0]->d)));
    for (int r = 0; r < 4; ++r) {
      const int8_t* qy = ys[r][ib].qs;
      __m256i dot0 = _mm256_setzero_si256(), dot1 = _mm256_setzero_si256();
      for (int k = 0; k < 8; k += 2) {
        dot0 = _mm256_dpbusd_epi32(dot0, w[k], _mm256_set1_epi32(load_i32(qy + 4 * k)));
        dot1 = _mm256_dpbusd_epi32(dot1, w[k + 1], _mm256_set1_epi32(load_i32(qy + 4 * k + 4)));
      }
      const __m256i ysum8 = _mm256_dpbusd_epi32(_mm256_setzero_si256(), ones8,
                                                _mm256_loadu_si256(reinterpret_cast<const __m256i*>(qy)));
      __m128i ys4 = _mm_add_epi32(_mm256_castsi256_si128(ysum8), _mm256_extracti128_si256(ysum8, 1));
      ys4 = _mm_add_epi32(ys4, _mm_shuffle_epi32(ys4, _MM_SHUFFLE(1, 0, 3, 2)));
      ys4 = _mm_add_epi32(ys4, _mm_shuffle_epi32(ys4, _MM_SHUFFLE(2, 3, 0, 1)));  // sum(y) in every lane
      const __m256i isum =
          _mm256_sub_epi32(_mm256_add_epi32(dot0, dot1), _mm256_broadcastd_epi32(_mm_slli_epi32(ys4, 3)));
      const __m256 dy = _mm256_broadcastss_ps(_mm_cvtph_ps(_mm_cvtsi32_si128(ys[r][ib].d)));
      acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), _mm256_mul_ps(dx, dy), acc[r]);
    }
  }
  for (int r = 0; r < 4; ++r) _mm256_storeu_ps(reinterpret_cast<float*>(reinterpret_cast<char*>(s) + r * s_stride), acc[r]);
}

}  // namespace kiln::quant
