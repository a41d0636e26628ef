// The Q4_0x8 kernels (layouts.h), shared by the AVX2 and AVX-512 files and bit-identical to
// gemm_q4_0x8: lane i of a vector holds weight row i's sum for one block, exactly as the scalar
// kernel's integer sum, and takes the same FMA per block. Weight nibbles are unpacked once per
// block for up to four activation rows. (One activation row against two groups of eight at once,
// two chains, was 1.17x faster on Zen 3 while a group's scales and quants were two streams; with
// one stream per group it was 0.82x on Zen 4, docs/performance.md.) The ISA files supply the
// integer step:
//   Isa::unpack(raw, w)    from the block's four 32-byte vectors raw[m] (bytes 4m.. of each row),
//                          the eight vectors w[] that row_sum reads;
//   Isa::row_sum(w, a)     lane i: sum(level * activation) of row i for the activation block a,
//                          levels q - 8, exactly (a.sum8 is 8 * sum(a.qs)).
// Include only from files compiled for AVX2 or wider; everything here has internal linkage (no copy
// compiled for one ISA stands in for another's caller).
#pragma once

#include <immintrin.h>

#include <cstdint>

#include "ops/gemm/avx2_util.h"
#include "ops/gemm/layouts.h"

namespace kiln::gemm {
namespace {  // NOLINT: internal linkage on purpose (see above)

// Block b of a group (layouts.h): its eight scales widened, and its quants unpacked by Isa.
inline const uint8_t* q4_0x8_block(const uint8_t* group, int64_t b) {
  return group + static_cast<size_t>(b) * kQ4_0x8BlockBytes;
}
inline __m256 q4_0x8_scales(const uint8_t* block) {
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(block)));
}
template <class Isa>
inline void q4_0x8_unpack(const uint8_t* block, __m256i w[8]) {
  __m256i raw[4];
  for (int m = 0; m < 4; ++m)
    raw[m] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(block + kQ4_0x8ScaleBytes + 32 * m));
  Isa::unpack(raw, w);
}

// Output rows 8g .. 8g+7 (`group`) of activation rows r0 .. r0 + NR - 1.
template <class Isa, int NR>
inline void q4_0x8_tile(int64_t nb, const uint8_t* group, const ActQ8_0* const a[NR], __m256 acc[NR]) {
  for (int r = 0; r < NR; ++r) acc[r] = _mm256_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* block = q4_0x8_block(group, b);
    const __m256 dw = q4_0x8_scales(block);
    __m256i w[8];
    q4_0x8_unpack<Isa>(block, w);
    for (int r = 0; r < NR; ++r) {
      const ActQ8_0& ab = a[r][b];
      const __m256i isum = Isa::row_sum(w, ab);
      acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), _mm256_mul_ps(dw, _mm256_set1_ps(ab.d)), acc[r]);
    }
  }
}

template <class Isa, int NR>
inline void q4_0x8_rows(const Tile& t, int64_t r0) {
  const int64_t nb = t.k / 32;
  const ActQ8_0* a[NR];
  for (int r = 0; r < NR; ++r)
    a[r] = reinterpret_cast<const ActQ8_0*>(t.act + static_cast<size_t>(r0 + r) * t.act_stride);
  for (int64_t g = 0; g < t.n_rows / 8; ++g) {
    __m256 acc[NR];
    q4_0x8_tile<Isa, NR>(nb, reinterpret_cast<const uint8_t*>(t.w + static_cast<size_t>(g) * t.w_stride), a, acc);
    for (int r = 0; r < NR; ++r) store_rows8(t, r0 + r, 8 * g, acc[r]);
  }
}

// gemm_q4_0x8's contract over a whole tile.
template <class Isa>
inline void q4_0x8_gemm(const Tile& t) {
  for_act_groups(t.n_act, [&]<int NR>(int64_t r0) { q4_0x8_rows<Isa, NR>(t, r0); });
}

}  // namespace
}  // namespace kiln::gemm
