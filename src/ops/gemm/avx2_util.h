// Helpers of the AVX2 matrix kernels. Include only from files compiled for AVX2 (*_avx2.cpp); the
// functions have internal linkage, so no AVX2 copy can stand in for a caller on another CPU.
#pragma once

#include <immintrin.h>

#include <cstddef>
#include <cstdint>

#include "ops/gemm/gemm.h"

namespace kiln::gemm {
namespace {  // NOLINT: internal linkage on purpose (see above)

// Four bytes p[0..3] in every 32-bit lane.
inline __m256i broadcast4(const int8_t* p) {
  int32_t v;
  __builtin_memcpy(&v, p, sizeof(v));
  return _mm256_set1_epi32(v);
}

// Eight outputs of activation row r, weight rows i .. i + 7.
inline void store_rows8(const Tile& t, int64_t r, int64_t i, __m256 v) {
  char* p = reinterpret_cast<char*>(t.dst) + static_cast<size_t>(r) * t.dst_row_stride +
            static_cast<size_t>(i) * t.dst_col_stride;
  if (t.dst_col_stride == sizeof(float)) {
    _mm256_storeu_ps(reinterpret_cast<float*>(p), v);
    return;
  }
  alignas(32) float tmp[8];
  _mm256_store_ps(tmp, v);
  for (int j = 0; j < 8; ++j)
    *reinterpret_cast<float*>(p + static_cast<size_t>(j) * t.dst_col_stride) = tmp[j];
}

// One output.
inline void store1(const Tile& t, int64_t r, int64_t i, float v) {
  *reinterpret_cast<float*>(reinterpret_cast<char*>(t.dst) + static_cast<size_t>(r) * t.dst_row_stride +
                            static_cast<size_t>(i) * t.dst_col_stride) = v;
}

// hsum_float_8: (l + l+4) pairs, then (0+2, 1+3), then 0+1 (layouts.h reduce_lanes8).
inline float hsum8(__m256 x) {
  __m128 r = _mm_add_ps(_mm256_extractf128_ps(x, 1), _mm256_castps256_ps128(x));
  r = _mm_add_ps(r, _mm_movehl_ps(r, r));
  r = _mm_add_ss(r, _mm_movehdup_ps(r));
  return _mm_cvtss_f32(r);
}

// Calls body.template operator()<NR>(r0) for activation rows in groups of four, then the rest.
template <class Body>
inline void for_act_groups(int64_t n_act, Body&& body) {
  int64_t r = 0;
  for (; r + 4 <= n_act; r += 4) body.template operator()<4>(r);
  switch (n_act - r) {
    case 3:
      body.template operator()<3>(r);
      break;
    case 2:
      body.template operator()<2>(r);
      break;
    case 1:
      body.template operator()<1>(r);
      break;
    default:
      break;
  }
}

// Calls body.template operator()<NI, NR>(i0, r0) over tiles of NI <= MaxI weight rows and NR <= 4
// activation rows covering n_rows x n_act: activation rows outermost, in groups of four.
template <int MaxI, class Body>
inline void for_tiles(int64_t n_rows, int64_t n_act, Body&& body) {
  for_act_groups(n_act, [&]<int NR>(int64_t r0) {
    int64_t i = 0;
    for (; i + MaxI <= n_rows; i += MaxI) body.template operator()<MaxI, NR>(i, r0);
    if constexpr (MaxI > 1) {
      for (; i < n_rows; ++i) body.template operator()<1, NR>(i, r0);
    }
  });
}

}  // namespace
}  // namespace kiln::gemm
