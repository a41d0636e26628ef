// K-quant unpacking steps shared by the AVX2 dot products (vec_dot_avx2.cpp) and the matrix tiles
// (ops/gemm/k_quant_tiles_avx2.cpp), so that both see the same levels, scales and bias.
// Include only from files compiled for AVX2 (the *_avx2.cpp / *_avx512.cpp rule in CMakeLists).
#pragma once

#include <immintrin.h>

#include <cstdint>
#include <cstring>

namespace kiln::quant {
// Internal linkage: files compiled for AVX2 and for AVX-512 include this, and no copy compiled for
// one may stand in for the other's caller.
namespace {  // NOLINT

// The eight 6-bit scales (sm[0..7]) and mins (sm[8..15]) of a Q4_K / Q5_K block's 12 packed bytes.
inline void k4_scales_mins(const uint8_t* scales, uint8_t sm[16]) {
  const uint32_t kmask1 = 0x3f3f3f3f, kmask2 = 0x0f0f0f0f, kmask3 = 0x03030303;
  uint32_t utmp[4];
  std::memcpy(utmp, scales, 12);
  utmp[3] = ((utmp[2] >> 4) & kmask2) | (((utmp[1] >> 6) & kmask3) << 4);
  const uint32_t uaux = utmp[1] & kmask1;
  utmp[1] = (utmp[2] & kmask2) | (((utmp[0] >> 6) & kmask3) << 4);
  utmp[2] = uaux;
  utmp[0] &= kmask1;
  std::memcpy(sm, utmp, 16);
}

// The sixteen 6-bit scales of a Q3_K block's 12 packed bytes, less their bias 32 (-32..31), as
// int8 in one register (built in registers: a 16-byte load of bytes just stored piecewise would
// wait for the stores).
inline __m128i q3_K_scales(const uint8_t* scales) {
  const uint32_t kmask1 = 0x03030303, kmask2 = 0x0f0f0f0f;
  uint32_t aux[3];
  std::memcpy(aux, scales, 12);
  const uint32_t tmp = aux[2];
  const __m128i sc =
      _mm_setr_epi32(static_cast<int>((aux[0] & kmask2) | (((tmp >> 0) & kmask1) << 4)),
                     static_cast<int>((aux[1] & kmask2) | (((tmp >> 2) & kmask1) << 4)),
                     static_cast<int>(((aux[0] >> 4) & kmask2) | (((tmp >> 4) & kmask1) << 4)),
                     static_cast<int>(((aux[1] >> 4) & kmask2) | (((tmp >> 6) & kmask1) << 4)));
  return _mm_sub_epi8(sc, _mm_set1_epi8(32));
}

// The 128 levels 0..63 (stored value, biased by 32) of half a Q6_K super-block: low nibbles from
// ql[0..64), two high bits each from qh[0..32); lv[k] holds values 32k..32k+31 in order.
inline void q6_K_levels(const uint8_t* ql, const uint8_t* qh, __m256i lv[4]) {
  const __m256i m4 = _mm256_set1_epi8(0xF);
  const __m256i q4bits1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(ql));
  const __m256i q4bits2 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(ql + 32));
  const __m256i q4bitsH = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(qh));
  // Each pair of high bits masked in place, then moved to bits 4..5 (a 16-bit shift moves no set
  // bit across a byte).
  const __m256i h0 = _mm256_slli_epi16(_mm256_and_si256(q4bitsH, _mm256_set1_epi8(0x03)), 4);
  const __m256i h1 = _mm256_slli_epi16(_mm256_and_si256(q4bitsH, _mm256_set1_epi8(0x0C)), 2);
  const __m256i h2 = _mm256_and_si256(q4bitsH, _mm256_set1_epi8(0x30));
  const __m256i h3 =
      _mm256_srli_epi16(_mm256_and_si256(q4bitsH, _mm256_set1_epi8(static_cast<char>(0xC0))), 2);
  lv[0] = _mm256_or_si256(_mm256_and_si256(q4bits1, m4), h0);
  lv[1] = _mm256_or_si256(_mm256_and_si256(q4bits2, m4), h1);
  lv[2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(q4bits1, 4), m4), h2);
  lv[3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(q4bits2, 4), m4), h3);
}

// int16 lanes 0..7 = scales[2k], lanes 8..15 = scales[2k + 1], from a block's 16 int8 scales held
// in one register (k < 8).
inline __m256i scales_pair_of(__m128i scales, int k) {
  const int64_t lo = 0x0101010101010101LL * (2 * k), hi = 0x0101010101010101LL * (2 * k + 1);
  return _mm256_cvtepi8_epi16(_mm_shuffle_epi8(scales, _mm_set_epi64x(hi, lo)));
}

// The bias 32 of the levels as ggml removes it from a super-block's eight int32 lanes: lane l
// loses 32 * (bsums[2l] * scales[2l] + bsums[2l + 1] * scales[2l + 1]). scales16: the block's 16
// scales widened to int16.
inline __m256i q6_K_bias(const int16_t* bsums, __m256i scales16) {
  return _mm256_slli_epi32(
      _mm256_madd_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(bsums)), scales16), 5);
}

}  // namespace
}  // namespace kiln::quant
