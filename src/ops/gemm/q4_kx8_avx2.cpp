// AVX2 kernel of the Q4_Kx8 layout (layouts.h), bit-identical to gemm_q4_Kx8: lane i of a vector
// holds weight row i's integer sums of a super-block, exactly as the scalar kernel's, and takes the
// same two FMAs per super-block. Weight nibbles are unpacked once per sub-block for up to four
// activation rows. Compiled for AVX2 + FMA + F16C; uses no inline function of a shared header.
#include <immintrin.h>

#include <cstdint>

#include "ops/gemm/avx2_util.h"
#include "ops/gemm/layouts.h"

namespace kiln::gemm {
namespace {

template <int NR>
inline void q4_Kx8_tile(int64_t nsb, const Q4Kx8Header* headers, const uint8_t* q,
                        const quant::BlockQ8_K* const a[NR], __m256 out[NR]) {
  const __m256i low4 = _mm256_set1_epi8(0x0F);
  __m256 acc[NR], acc_min[NR];
  for (int r = 0; r < NR; ++r) acc[r] = acc_min[r] = _mm256_setzero_ps();
  for (int64_t s = 0; s < nsb; ++s) {
    const Q4Kx8Header& h = headers[s];
    const uint8_t* qs = q + 1024 * s;
    __m256i isum[NR];
    for (int r = 0; r < NR; ++r) isum[r] = _mm256_setzero_si256();
    for (int j = 0; j < 8; ++j) {
      // Sub-block j: low nibbles of pair j / 2 for even j, high nibbles for odd j.
      __m256i w[8];
      for (int m = 0; m < 8; ++m) {
        const __m256i raw = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(qs + 256 * (j / 2) + 32 * m));
        w[m] = _mm256_and_si256(j % 2 ? _mm256_srli_epi16(raw, 4) : raw, low4);
      }
      // Lane i: row i's scale in both 16-bit halves (a madd then gives scale * (lo + hi)).
      const __m256i sc = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(h.scales[j])));
      const __m256i sc_pair = _mm256_or_si256(sc, _mm256_slli_epi32(sc, 16));
      for (int r = 0; r < NR; ++r) {
        const int8_t* y = a[r][s].qs + 32 * j;
        // Eight pair sums of at most 2 * 15 * 127 each: their 16-bit sum (<= 30480) cannot overflow.
        __m256i s16 = _mm256_maddubs_epi16(w[0], broadcast4(y));
        for (int m = 1; m < 8; ++m)
          s16 = _mm256_add_epi16(s16, _mm256_maddubs_epi16(w[m], broadcast4(y + 4 * m)));
        isum[r] = _mm256_add_epi32(isum[r], _mm256_madd_epi16(s16, sc_pair));
      }
    }
    const __m256 dw = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(h.d)));
    const __m256 dmin = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(h.dmin)));
    for (int r = 0; r < NR; ++r) {
      const quant::BlockQ8_K& ab = a[r][s];
      // Sums of the activations per 32 (pairs of bsums), int16: dword p = sub-blocks 2p, 2p+1.
      const __m128i bs = _mm_hadd_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(ab.bsums)),
                                        _mm_loadu_si128(reinterpret_cast<const __m128i*>(ab.bsums + 8)));
      const __m256i bs_all = _mm256_broadcastsi128_si256(bs);
      __m256i imin;
      // Lane i of mins(p): (min of sub-block 2p, min of 2p+1) of row i, as int16.
      auto mins = [&](int p) {
        return _mm256_cvtepu8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(h.mins[p])));
      };
      imin = _mm256_add_epi32(_mm256_madd_epi16(mins(0), _mm256_shuffle_epi32(bs_all, 0x00)),
                              _mm256_madd_epi16(mins(1), _mm256_shuffle_epi32(bs_all, 0x55)));
      imin = _mm256_add_epi32(
          imin, _mm256_add_epi32(_mm256_madd_epi16(mins(2), _mm256_shuffle_epi32(bs_all, 0xAA)),
                                 _mm256_madd_epi16(mins(3), _mm256_shuffle_epi32(bs_all, 0xFF))));
      const __m256 dy = _mm256_set1_ps(ab.d);
      acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum[r]), _mm256_mul_ps(dw, dy), acc[r]);
      acc_min[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(imin), _mm256_mul_ps(dmin, dy), acc_min[r]);
    }
  }
  for (int r = 0; r < NR; ++r) out[r] = _mm256_sub_ps(acc[r], acc_min[r]);
}

template <int NR>
void q4_Kx8_rows(const Tile& t, int64_t r0) {
  const int64_t nsb = t.k / 256;
  const quant::BlockQ8_K* a[NR];
  for (int r = 0; r < NR; ++r)
    a[r] = reinterpret_cast<const quant::BlockQ8_K*>(t.act + static_cast<size_t>(r0 + r) * t.act_stride);
  for (int64_t g = 0; g < t.n_rows / 8; ++g) {
    const char* group = t.w + static_cast<size_t>(g) * t.w_stride;
    __m256 out[NR];
    q4_Kx8_tile<NR>(nsb, reinterpret_cast<const Q4Kx8Header*>(group),
                    reinterpret_cast<const uint8_t*>(group) + static_cast<size_t>(nsb) * sizeof(Q4Kx8Header),
                    a, out);
    for (int r = 0; r < NR; ++r) store_rows8(t, r0 + r, 8 * g, out[r]);
  }
}

}  // namespace

void gemm_q4_Kx8_avx2(const Tile& t) {
  for_act_groups(t.n_act, [&]<int NR>(int64_t r0) { q4_Kx8_rows<NR>(t, r0); });
}

}  // namespace kiln::gemm
