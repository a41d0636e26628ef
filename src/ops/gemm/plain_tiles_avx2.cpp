// AVX2 kernel of the plain Q8_0 family (layouts.h), two weight rows by up to four activation rows
// at a time; each output keeps its own 8-lane accumulator, so every output takes exactly the
// operations of plain_tiles.cpp's scalar kernel. Compiled for AVX2 + FMA + F16C; uses
// no inline function of a shared header.
#include <immintrin.h>

#include <cstdint>

#include "ops/gemm/avx2_util.h"
#include "ops/gemm/layouts.h"

namespace kiln::gemm {
namespace {

const char* row_of(const Tile& t, int64_t i) { return t.w + static_cast<size_t>(i) * t.w_stride; }
const char* act_of(const Tile& t, int64_t r) { return t.act + static_cast<size_t>(r) * t.act_stride; }

// Q8_0: per block and lane, fma(d_w * d_a, float(sum of 4 products), lane).
template <int NI, int NR>
void q8_0_tile(const Tile& t, int64_t i0, int64_t r0) {
  const int64_t nb = t.k / 32;
  const __m256i ones16 = _mm256_set1_epi16(1);
  const quant::BlockQ8_0* w[NI];
  const ActQ8_0* a[NR];
  for (int i = 0; i < NI; ++i) w[i] = reinterpret_cast<const quant::BlockQ8_0*>(row_of(t, i0 + i));
  for (int r = 0; r < NR; ++r) a[r] = reinterpret_cast<const ActQ8_0*>(act_of(t, r0 + r));
  __m256 acc[NI][NR];
  for (int i = 0; i < NI; ++i)
    for (int r = 0; r < NR; ++r) acc[i][r] = _mm256_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    __m256i wx[NI], wabs[NI];
    __m256 dw[NI];  // the weight scale in every lane: d_w * d_a is then one vector multiply
    for (int i = 0; i < NI; ++i) {
      wx[i] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w[i][b].qs));
      wabs[i] = _mm256_sign_epi8(wx[i], wx[i]);
      dw[i] = _mm256_set1_ps(_cvtsh_ss(w[i][b].d));
    }
    for (int r = 0; r < NR; ++r) {
      const __m256i y = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a[r][b].qs));
      const __m256 da = _mm256_broadcast_ss(&a[r][b].d);
      for (int i = 0; i < NI; ++i) {
        // |w| * (y with w's sign): the products of w and y, summed four at a time (exact).
        const __m256i sum =
            _mm256_madd_epi16(_mm256_maddubs_epi16(wabs[i], _mm256_sign_epi8(y, wx[i])), ones16);
        acc[i][r] = _mm256_fmadd_ps(_mm256_mul_ps(dw[i], da), _mm256_cvtepi32_ps(sum), acc[i][r]);
      }
    }
  }
  for (int i = 0; i < NI; ++i)
    for (int r = 0; r < NR; ++r) store1(t, r0 + r, i0 + i, hsum8(acc[i][r]));
}

}  // namespace

void gemm_q8_0_avx2(const Tile& t) {
  for_tiles<2>(t.n_rows, t.n_act,
               [&]<int NI, int NR>(int64_t i0, int64_t r0) { q8_0_tile<NI, NR>(t, i0, r0); });
}

}  // namespace kiln::gemm
