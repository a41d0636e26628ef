// The Q8_0x8 kernels (layouts.h), shared by the AVX2 and AVX-512 files and bit-identical to
// gemm_q8_0x8: vector m holds lane m of gemm_q8_0's eight lane sums for the group's eight rows,
// takes the same FMA per block, and the final reduction is gemm_q8_0's hsum done with vertical
// adds. One activation row at a time (its eight accumulators fill half the registers). The ISA
// files supply the integer step. Include only from files compiled for AVX2 or wider; everything
// here has internal linkage (no copy compiled for one ISA stands in for another's caller).
#pragma once

#include <immintrin.h>

#include <cstdint>

#include "ops/gemm/avx2_util.h"
#include "ops/gemm/layouts.h"

namespace kiln::gemm {
namespace {  // NOLINT: internal linkage on purpose (see above)

// Outputs of rows 8g .. 8g+7 (`group`) for one activation row. sum4(abs_y, signed_w) returns, per
// 32-bit lane, the exact sum of the four products of the unsigned bytes abs_y (|a|, at most 127)
// and the signed bytes signed_w (w with a's sign; w != -128).
template <class Sum4>
inline __m256 q8_0x8_row(int64_t nb, const char* group, const ActQ8_0Abs* a, Sum4 sum4) {
  __m256 acc[8];
  for (int m = 0; m < 8; ++m) acc[m] = _mm256_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    const ActQ8_0Abs& ab = a[b];
    const char* block = group + static_cast<size_t>(b) * kQ8_0x8BlockBytes;
    const __m256 dd = _mm256_mul_ps(_mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(block))),
                                    _mm256_broadcast_ss(&ab.d));
    const char* q = block + kQ8_0x8ScaleBytes;
    for (int m = 0; m < 8; ++m) {
      const __m256i w = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q + 32 * m));
      const __m256i sum = sum4(broadcast4(reinterpret_cast<const int8_t*>(ab.abs_qs + 4 * m)),
                               _mm256_sign_epi8(w, broadcast4(ab.qs + 4 * m)));
      acc[m] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sum), dd, acc[m]);
    }
  }
  // hsum_float_8's order per row: (l + l+4), then (0+2, 1+3), then 0+1.
  const __m256 h0 = _mm256_add_ps(acc[0], acc[4]), h1 = _mm256_add_ps(acc[1], acc[5]);
  const __m256 h2 = _mm256_add_ps(acc[2], acc[6]), h3 = _mm256_add_ps(acc[3], acc[7]);
  return _mm256_add_ps(_mm256_add_ps(h0, h2), _mm256_add_ps(h1, h3));
}

// gemm_q8_0x8's contract over a whole tile, with the integer step sum4 (q8_0x8_row).
template <class Sum4>
inline void q8_0x8_gemm(const Tile& t, Sum4 sum4) {
  const int64_t nb = t.k / 32;
  for (int64_t g = 0; g < t.n_rows / 8; ++g) {
    const char* group = t.w + static_cast<size_t>(g) * t.w_stride;
    for (int64_t r = 0; r < t.n_act; ++r) {
      const auto* a = reinterpret_cast<const ActQ8_0Abs*>(t.act + static_cast<size_t>(r) * t.act_stride);
      store_rows8(t, r, 8 * g, q8_0x8_row(nb, group, a, sum4));
    }
  }
}

}  // namespace
}  // namespace kiln::gemm
