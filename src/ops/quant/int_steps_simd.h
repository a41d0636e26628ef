// The integer steps of the x86 dot products, one definition per kernel level: a file compiled for
// AVX-512 VNNI (CMake's *_avx512.cpp rule: VNNI and VL) gets VNNI instructions on 256-bit vectors,
// a file compiled for AVX2 gets the AVX2 sequences. Contract: for every input a step admits, both
// definitions return the same int32 lanes, so a kernel written once over these steps (its float
// operations untouched) gives the same bits at both levels. Include only from files compiled for
// AVX2 or wider; internal linkage, so that no copy compiled for one ISA stands in for another's.
#pragma once

#include <immintrin.h>

namespace kiln::quant {
namespace {  // NOLINT: internal linkage on purpose (see above)

#if defined(__AVX512VNNI__) && defined(__AVX512VL__)
inline constexpr bool kVnniSteps = true;
#else
inline constexpr bool kVnniSteps = false;
#endif

// acc + madd_epi16(a, b): int32 lane l += a[2l] * b[2l] + a[2l+1] * b[2l+1], modulo 2^32 at both
// levels (vpdpwssd does not saturate). Any inputs.
inline __m256i madd_add(__m256i acc, __m256i a, __m256i b) {
  if constexpr (kVnniSteps) {
    return _mm256_dpwssd_epi32(acc, a, b);
  } else {
    return _mm256_add_epi32(acc, _mm256_madd_epi16(a, b));
  }
}

// Per int32 lane, the sum of its four products of the unsigned bytes of u and the signed bytes of
// s. Admits inputs whose adjacent pairs of products sum within int16 (AVX2's vpmaddubsw saturates
// there; vpdpbusd never does): every u <= 128 qualifies.
inline __m256i dot_u8_i8(__m256i u, __m256i s) {
  if constexpr (kVnniSteps) {
    return _mm256_dpbusd_epi32(_mm256_setzero_si256(), u, s);
  } else {
    return _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1));
  }
}

// acc + dot_u8_i8(u, s), same admission.
inline __m256i dot_u8_i8_add(__m256i acc, __m256i u, __m256i s) {
  if constexpr (kVnniSteps) {
    return _mm256_dpbusd_epi32(acc, u, s);
  } else {
    return _mm256_add_epi32(acc, dot_u8_i8(u, s));
  }
}

// The same for signed x and y: |x| (<= 128) times y with x's sign. Any inputs (ggml's
// mul_sum_i8_pairs; its sign trick takes y = -128 with negative x to -128, at both levels).
inline __m256i dot_i8_i8(__m256i x, __m256i y) {
  return dot_u8_i8(_mm256_sign_epi8(x, x), _mm256_sign_epi8(y, x));
}

// acc + per int32 lane: its scale times the sum over k < K of the four-product sums of u[k] and
// s[k] (dot_u8_i8's, same admission), where scale16 holds each lane's scale in both 16-bit halves.
// AVX2 scales each k's vpmaddubsw pairs by vpmaddwd (ggml's order of steps); VNNI sums the K
// products in two vpdpbusd chains and multiplies once (the int32 result is the same exact sum).
template <int K>
inline __m256i scaled_dots_add(__m256i acc, const __m256i u[K], const __m256i s[K], __m256i scale16) {
  if constexpr (kVnniSteps) {
    static_assert(K % 2 == 0);
    __m256i even = _mm256_setzero_si256(), odd = _mm256_setzero_si256();
    for (int k = 0; k < K; k += 2) {
      even = _mm256_dpbusd_epi32(even, u[k], s[k]);
      odd = _mm256_dpbusd_epi32(odd, u[k + 1], s[k + 1]);
    }
    const __m256i scale = _mm256_srai_epi32(scale16, 16);
    return _mm256_add_epi32(acc, _mm256_mullo_epi32(_mm256_add_epi32(even, odd), scale));
  } else {
    for (int k = 0; k < K; ++k) acc = madd_add(acc, _mm256_maddubs_epi16(u[k], s[k]), scale16);
    return acc;
  }
}

}  // namespace
}  // namespace kiln::quant
