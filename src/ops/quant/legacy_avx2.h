// The levels of the 32-value legacy blocks as bytes, shared by the AVX2 dot products
// (vec_dot_avx2.cpp) and the matrix tiles (ops/gemm/plain_tiles_avx2.cpp), so that both read the
// same values. Byte j of each result is element j of the block. Include only from files compiled
// for AVX2 (the *_avx2.cpp / *_avx512.cpp rule in CMakeLists).
#pragma once

#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "ops/quant/blocks.h"

namespace kiln::quant {
// Internal linkage: files compiled for AVX2 and for AVX-512 include this, and no copy compiled for
// one may stand in for the other's caller.
namespace {  // NOLINT

// 32 nibbles: low nibbles of 16 bytes in bytes 0..15, high nibbles in bytes 16..31.
inline __m256i bytes_from_nibbles_32(const uint8_t* rsi) {
  const __m128i tmp = _mm_loadu_si128(reinterpret_cast<const __m128i*>(rsi));
  const __m256i bytes = _mm256_insertf128_si256(_mm256_castsi128_si256(tmp), _mm_srli_epi16(tmp, 4), 1);
  return _mm256_and_si256(bytes, _mm256_set1_epi8(0x0F));
}

// 32 bytes: 0xFF where bit j of the little-endian uint32 at x is set, else 0.
inline __m256i bytes_from_bits_32(const uint8_t* x) {
  uint32_t x32;
  std::memcpy(&x32, x, sizeof(x32));
  const __m256i shuf_mask = _mm256_set_epi64x(0x0303030303030303, 0x0202020202020202, 0x0101010101010101, 0);
  __m256i bytes = _mm256_shuffle_epi8(_mm256_set1_epi32(static_cast<int>(x32)), shuf_mask);
  bytes = _mm256_or_si256(bytes, _mm256_set1_epi64x(0x7fbfdfeff7fbfdfe));
  return _mm256_cmpeq_epi8(bytes, _mm256_set1_epi64x(-1));
}

// Q5_0: (nibble | bit << 4) - 16, as signed bytes (-16..15): nibble | (bit ? 0 : 0xF0).
inline __m256i q5_0_levels(const BlockQ5_0& b) {
  const __m256i hi = _mm256_andnot_si256(bytes_from_bits_32(b.qh), _mm256_set1_epi8(static_cast<char>(0xF0)));
  return _mm256_or_si256(bytes_from_nibbles_32(b.qs), hi);
}

// Q5_1: nibble | bit << 4 (0..31).
inline __m256i q5_1_levels(const BlockQ5_1& b) {
  return _mm256_or_si256(bytes_from_nibbles_32(b.qs),
                         _mm256_and_si256(bytes_from_bits_32(b.qh), _mm256_set1_epi8(0x10)));
}

}  // namespace
}  // namespace kiln::quant
