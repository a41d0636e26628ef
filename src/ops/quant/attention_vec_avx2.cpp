// AVX2 + F16C bodies of attention_vec.h.
#include <immintrin.h>

#include <cmath>
#include <cstddef>
#include <cstdint>

#include "core/dtype.h"
#include "ops/quant/attention_vec.h"
#include "ops/quant/simd_math_avx2.h"

namespace kiln::quant {
namespace {

// Eight values of x (F32 or F16) from index i, as floats.
inline __m256 load8(const void* x, DType type, int64_t i) {
  if (type == DType::F16)
    return _mm256_cvtph_ps(
        _mm_loadu_si128(reinterpret_cast<const __m128i*>(static_cast<const uint16_t*>(x) + i)));
  return _mm256_loadu_ps(static_cast<const float*>(x) + i);
}

// Calls body.template operator()<NQ>() for nq in [1, kMaxQueries].
template <class Body>
void with_nq(int nq, Body&& body) {
  static_assert(kMaxQueries == 6);
  switch (nq) {
    case 1:
      return body.template operator()<1>();
    case 2:
      return body.template operator()<2>();
    case 3:
      return body.template operator()<3>();
    case 4:
      return body.template operator()<4>();
    case 5:
      return body.template operator()<5>();
    default:
      return body.template operator()<6>();
  }
}

// In place: r[j] lane e -> r[e] lane j (an 8x8 transpose).
inline void transpose8(__m256 r[8]) {
  __m256 t[8], u[8];
  for (int k = 0; k < 4; ++k) {
    t[2 * k] = _mm256_unpacklo_ps(r[2 * k], r[2 * k + 1]);
    t[2 * k + 1] = _mm256_unpackhi_ps(r[2 * k], r[2 * k + 1]);
  }
  for (int k = 0; k < 2; ++k) {
    u[4 * k + 0] = _mm256_shuffle_ps(t[4 * k], t[4 * k + 2], _MM_SHUFFLE(1, 0, 1, 0));
    u[4 * k + 1] = _mm256_shuffle_ps(t[4 * k], t[4 * k + 2], _MM_SHUFFLE(3, 2, 3, 2));
    u[4 * k + 2] = _mm256_shuffle_ps(t[4 * k + 1], t[4 * k + 3], _MM_SHUFFLE(1, 0, 1, 0));
    u[4 * k + 3] = _mm256_shuffle_ps(t[4 * k + 1], t[4 * k + 3], _MM_SHUFFLE(3, 2, 3, 2));
  }
  for (int k = 0; k < 4; ++k) {
    r[k] = _mm256_permute2f128_ps(u[k], u[k + 4], 0x20);
    r[k + 4] = _mm256_permute2f128_ps(u[k], u[k + 4], 0x31);
  }
}

}  // namespace

namespace {

// x rounded to F16 and widened again (exact: the value an F16 store and reload would give).
inline __m256 round_f16(__m256 x) { return _mm256_cvtph_ps(_mm256_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT)); }

// y[i0 .. i0 + 8 NV) over all the keys, in NV registers.
template <int NV>
void mad_keys_chunk(int64_t n_keys, const F16Key* keys, int64_t i0, uint16_t* y, const char* rows,
                    size_t row_bytes) {
  __m256 acc[NV];
  for (int c = 0; c < NV; ++c) acc[c] = load8(y, DType::F16, i0 + 8 * c);
  for (int64_t e = 0; e < n_keys; ++e) {
    const F16Key& key = keys[e];
    const char* x = rows + static_cast<size_t>(key.row) * row_bytes;
    if (key.scale != 1.0f) {
      const __m256 s = _mm256_set1_ps(key.scale);
      for (int c = 0; c < NV; ++c) acc[c] = round_f16(_mm256_mul_ps(acc[c], s));
    }
    const __m256 w = _mm256_set1_ps(key.weight);
    for (int c = 0; c < NV; ++c)
      acc[c] = round_f16(_mm256_fmadd_ps(load8(x, DType::F16, i0 + 8 * c), w, acc[c]));
  }
  for (int c = 0; c < NV; ++c)
    _mm_storeu_si128(reinterpret_cast<__m128i*>(y + i0 + 8 * c),
                     _mm256_cvtps_ph(acc[c], _MM_FROUND_TO_NEAREST_INT));
}

}  // namespace

void f16_mad_keys_avx2(int64_t n_keys, const F16Key* keys, int64_t n, uint16_t* y, const char* rows,
                       size_t row_bytes) {
  int64_t i0 = 0;
  for (; i0 + 64 <= n; i0 += 64) mad_keys_chunk<8>(n_keys, keys, i0, y, rows, row_bytes);
  for (; i0 < n; i0 += 8) mad_keys_chunk<1>(n_keys, keys, i0, y, rows, row_bytes);
}

namespace {

// Eight values of x from index i: F16 widened (kF16) or F32.
template <bool kF16>
inline __m256 load8_as(const void* x, int64_t i) {
  return load8(x, kF16 ? DType::F16 : DType::F32, i);
}

// y[qi][i0 .. i0 + 8 NV) of NQ queries over all rows, held in NQ x NV registers. kSkip: some
// v[qi][j] may be 0 (a masked key), and those are skipped; otherwise none is.
template <int NQ, int NV, bool kF16, bool kSkip>
void mad_rows_chunk(int64_t n_rows, int64_t i0, float* const* y, const char* rows, size_t row_bytes,
                    const float* const* v) {
  __m256 acc[NQ][NV];
  for (int qi = 0; qi < NQ; ++qi)
    for (int c = 0; c < NV; ++c) acc[qi][c] = _mm256_loadu_ps(y[qi] + i0 + 8 * c);
  for (int64_t j = 0; j < n_rows; ++j) {
    const char* x = rows + static_cast<size_t>(j) * row_bytes;
    if constexpr (NQ == 1) {  // each load feeds its one FMA (no registers held for the row)
      if (kSkip && v[0][j] == 0.0f) continue;
      const __m256 vv = _mm256_set1_ps(v[0][j]);
      for (int c = 0; c < NV; ++c) acc[0][c] = _mm256_fmadd_ps(load8_as<kF16>(x, i0 + 8 * c), vv, acc[0][c]);
    } else {
      __m256 xs[NV];
      for (int c = 0; c < NV; ++c) xs[c] = load8_as<kF16>(x, i0 + 8 * c);
      for (int qi = 0; qi < NQ; ++qi) {
        if (kSkip && v[qi][j] == 0.0f) continue;
        const __m256 vv = _mm256_broadcast_ss(v[qi] + j);
        for (int c = 0; c < NV; ++c) acc[qi][c] = _mm256_fmadd_ps(xs[c], vv, acc[qi][c]);
      }
    }
  }
  for (int qi = 0; qi < NQ; ++qi)
    for (int c = 0; c < NV; ++c) _mm256_storeu_ps(y[qi] + i0 + 8 * c, acc[qi][c]);
}

// NQ queries' chunks of 8 NV values (at most 16 accumulators; six queries keep two vectors each,
// ggml's AVX2 simd_gemm tile), then single vectors.
template <int NQ, bool kF16, bool kSkip>
void mad_rows_queries(int64_t n_rows, int64_t n, float* const* y, const char* rows, size_t row_bytes,
                      const float* const* v) {
  constexpr int kNv = NQ <= 4 ? 8 / NQ : 2;
  int64_t i0 = 0;
  for (; i0 + 8 * kNv <= n; i0 += 8 * kNv)
    mad_rows_chunk<NQ, kNv, kF16, kSkip>(n_rows, i0, y, rows, row_bytes, v);
  for (; i0 < n; i0 += 8) mad_rows_chunk<NQ, 1, kF16, kSkip>(n_rows, i0, y, rows, row_bytes, v);
}

// Whether any of w[0..n) is exactly 0 (either sign).
bool any_zero(int64_t n, const float* w) {
  const __m256 zero = _mm256_setzero_ps();
  __m256 hits = zero;
  int64_t j = 0;
  for (; j + 8 <= n; j += 8) hits = _mm256_or_ps(hits, _mm256_cmp_ps(_mm256_loadu_ps(w + j), zero, _CMP_EQ_OQ));
  bool any = _mm256_movemask_ps(hits) != 0;
  for (; j < n; ++j) any |= w[j] == 0.0f;
  return any;
}

template <int NQ>
void mad_rows_nq(int64_t n_rows, int64_t n, float* const* y, const char* rows, size_t row_bytes, DType x_type,
                 const float* const* v, bool skip_zero_weights) {
  bool skip = false;  // skipping, and any weight exactly 0: then the loops test each one
  for (int qi = 0; qi < NQ && skip_zero_weights && !skip; ++qi) skip = any_zero(n_rows, v[qi]);
  const bool f16 = x_type == DType::F16;
  if (f16 && skip) return mad_rows_queries<NQ, true, true>(n_rows, n, y, rows, row_bytes, v);
  if (f16) return mad_rows_queries<NQ, true, false>(n_rows, n, y, rows, row_bytes, v);
  if (skip) return mad_rows_queries<NQ, false, true>(n_rows, n, y, rows, row_bytes, v);
  return mad_rows_queries<NQ, false, false>(n_rows, n, y, rows, row_bytes, v);
}

}  // namespace

void f32_mad_rows_avx2(int nq, int64_t n_rows, int64_t n, float* const* y, const char* rows, size_t row_bytes,
                       DType x_type, const float* const* v, bool skip_zero_weights) {
  with_nq(nq, [&]<int NQ>() { mad_rows_nq<NQ>(n_rows, n, y, rows, row_bytes, x_type, v, skip_zero_weights); });
}

void transpose_rows8_f32_avx2(int64_t dk, const char* rows, size_t row_bytes, DType type, float* out,
                              int64_t ld) {
  for (int64_t e0 = 0; e0 < dk; e0 += 8) {
    __m256 k[8];
    for (int j = 0; j < 8; ++j) k[j] = load8(rows + j * row_bytes, type, e0);
    transpose8(k);
    for (int e = 0; e < 8; ++e) _mm256_storeu_ps(out + (e0 + e) * ld, k[e]);
  }
}

namespace {

// Columns at .. at + 8 NC of NQ queries: lane j of dot[qi][c] is column 8c + j's chain, from
// dot's value on entry over e in [e0, dk): the first n_unfused steps add a rounded product, the
// rest are FMAs.
template <int NQ, int NC>
void dot_cols_queries(int64_t e0, int64_t n_unfused, int64_t dk, const float* kt, int64_t ld,
                      const float* const* q, __m256 (&dot)[NQ][NC]) {
  for (int64_t e = e0; e < e0 + n_unfused; ++e) {
    __m256 k[NC];
    for (int c = 0; c < NC; ++c) k[c] = _mm256_loadu_ps(kt + e * ld + 8 * c);
    for (int qi = 0; qi < NQ; ++qi) {
      const __m256 qv = _mm256_broadcast_ss(q[qi] + e);
      for (int c = 0; c < NC; ++c) dot[qi][c] = _mm256_add_ps(dot[qi][c], _mm256_mul_ps(k[c], qv));
    }
  }
  for (int64_t e = e0 + n_unfused; e < dk; ++e) {
    __m256 k[NC];
    for (int c = 0; c < NC; ++c) k[c] = _mm256_loadu_ps(kt + e * ld + 8 * c);
    for (int qi = 0; qi < NQ; ++qi) {
      const __m256 qv = _mm256_broadcast_ss(q[qi] + e);
      for (int c = 0; c < NC; ++c) dot[qi][c] = _mm256_fmadd_ps(k[c], qv, dot[qi][c]);
    }
  }
}

template <int NQ, int NC>
void store_cols(const __m256 (&dot)[NQ][NC], float* const* out, int64_t at) {
  for (int qi = 0; qi < NQ; ++qi)
    for (int c = 0; c < NC; ++c) _mm256_storeu_ps(out[qi] + at + 8 * c, dot[qi][c]);
}

template <int NQ>
void dot_cols_nq(int64_t n, int64_t dk, const float* kt, int64_t ld, const float* const* q,
                 float* const* out) {
  int64_t j = 0;
  for (; j + 16 <= n; j += 16) {
    __m256 dot[NQ][2] = {};
    dot_cols_queries<NQ, 2>(0, 0, dk, kt + j, ld, q, dot);
    store_cols(dot, out, j);
  }
  for (; j < n; j += 8) {
    __m256 dot[NQ][1] = {};
    dot_cols_queries<NQ, 1>(0, 0, dk, kt + j, ld, q, dot);
    store_cols(dot, out, j);
  }
}

// vec_dot_f32_avx2's main loop (vec_dot_avx2.cpp dot_f32, PlainPos) for eight columns at once:
// over e < np (a multiple of 64), value e of a step goes to partial sum e % 64 by FMA; the 64
// partial sums are then reduced as its reduce_16_lanes: t[l] = (s[l] + s[32 + l]) + (s[16 + l] +
// s[48 + l]), u[l] = t[8 + l] + t[l], v[l] = u[4 + l] + u[l], (v0 + v2) + (v1 + v3).
__m256 main_steps_cols(int64_t np, const float* kt, int64_t ld, const float* q) {
  __m256 s[64];
  for (int m0 = 0; m0 < 64; m0 += 8) {  // eight partial sums at a time, in registers over the steps
    __m256 acc[8];
    for (__m256& x : acc) x = _mm256_setzero_ps();
    for (int64_t i = 0; i < np; i += 64)
      for (int m = 0; m < 8; ++m)
        acc[m] = _mm256_fmadd_ps(_mm256_loadu_ps(kt + (i + m0 + m) * ld), _mm256_set1_ps(q[i + m0 + m]), acc[m]);
    for (int m = 0; m < 8; ++m) s[m0 + m] = acc[m];
  }
  for (int l = 0; l < 16; ++l)
    s[l] = _mm256_add_ps(_mm256_add_ps(s[l], s[32 + l]), _mm256_add_ps(s[16 + l], s[48 + l]));
  for (int l = 0; l < 8; ++l) s[l] = _mm256_add_ps(s[8 + l], s[l]);
  for (int l = 0; l < 4; ++l) s[l] = _mm256_add_ps(s[4 + l], s[l]);
  return _mm256_add_ps(_mm256_add_ps(s[0], s[2]), _mm256_add_ps(s[1], s[3]));
}

// Columns in the order of vec_dot_f32_avx2 (its finish_f32): the main steps' sum, then the
// values past np, rounded products added in order for the whole chunks of 16 and one chunk of 8,
// FMAs for the last < 8.
template <int NQ, int NC>
void dot_cols_f32_order(int64_t dk, const float* kt, int64_t ld, const float* const* q, float* const* out,
                        int64_t at) {
  const int64_t np = dk & ~int64_t{63}, rest = dk - np;
  const int64_t n_unfused = (rest & ~int64_t{15}) + ((rest & 15) >= 8 ? 8 : 0);
  __m256 dot[NQ][NC];
  for (int qi = 0; qi < NQ; ++qi)
    for (int c = 0; c < NC; ++c)
      dot[qi][c] = np == 0 ? _mm256_setzero_ps() : main_steps_cols(np, kt + at + 8 * c, ld, q[qi]);
  dot_cols_queries<NQ, NC>(np, n_unfused, dk, kt + at, ld, q, dot);
  store_cols(dot, out, at);
}

template <int NQ>
void dot_cols_f32_order_nq(int64_t n, int64_t dk, const float* kt, int64_t ld, const float* const* q,
                           float* const* out) {
  int64_t j = 0;
  for (; j + 16 <= n; j += 16) dot_cols_f32_order<NQ, 2>(dk, kt, ld, q, out, j);
  for (; j < n; j += 8) dot_cols_f32_order<NQ, 1>(dk, kt, ld, q, out, j);
}

}  // namespace

void dot_cols_sequential_avx2(int nq, int64_t n, int64_t dk, const float* kt, int64_t ld,
                              const float* const* q, float* const* out) {
  with_nq(nq, [&]<int NQ>() { dot_cols_nq<NQ>(n, dk, kt, ld, q, out); });
}

void dot_cols_vec_dot_f32_avx2(int nq, int64_t n, int64_t dk, const float* kt, int64_t ld,
                               const float* const* q, float* const* out) {
  with_nq(nq, [&]<int NQ>() { dot_cols_f32_order_nq<NQ>(n, dk, kt, ld, q, out); });
}

float scale_add_mask_max_avx2(int64_t n, float* w, float scale, const float* mv) {
  const __m256 vs = _mm256_set1_ps(scale), ninf = _mm256_set1_ps(-INFINITY);
  __m256 m = ninf;
  for (int64_t i = 0; i < n; i += 8) {
    const __m256 add = _mm256_loadu_ps(mv + i);
    const __m256 x = _mm256_blendv_ps(_mm256_add_ps(_mm256_mul_ps(_mm256_loadu_ps(w + i), vs), add), ninf,
                                      _mm256_cmp_ps(add, ninf, _CMP_EQ_OQ));
    _mm256_storeu_ps(w + i, x);
    m = _mm256_max_ps(x, m);  // a NaN in x gives m
  }
  const __m128 h = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
  const __m128 q = _mm_max_ps(h, _mm_movehl_ps(h, h));
  return _mm_cvtss_f32(_mm_max_ss(q, _mm_shuffle_ps(q, q, 1)));
}

uint64_t visible_bits_avx2(int64_t n, const float* mv) {
  const __m256 ninf = _mm256_set1_ps(-INFINITY);
  uint64_t bits = 0;
  for (int64_t i = 0; i < n; i += 8) {
    const int visible = _mm256_movemask_ps(_mm256_cmp_ps(_mm256_loadu_ps(mv + i), ninf, _CMP_NEQ_UQ));
    bits |= static_cast<uint64_t>(visible) << i;
  }
  return bits;
}

float reduce_add_16_avx2(const float* v) {
  const __m256 h = _mm256_add_ps(_mm256_loadu_ps(v + 8), _mm256_loadu_ps(v));           // v[8 + i] + v[i]
  const __m128 q = _mm_add_ps(_mm256_extractf128_ps(h, 1), _mm256_castps256_ps128(h));  // h[4 + i] + h[i]
  const __m128 t = _mm_add_ps(q, _mm_movehl_ps(q, q));                                  // q0 + q2, q1 + q3
  return _mm_cvtss_f32(_mm_add_ss(t, _mm_shuffle_ps(t, t, 1)));  // (q0 + q2) + (q1 + q3)
}

void reduce_add_16_rows_avx2(int64_t n, const float* rows, int64_t ld, float* out) {
  for (int64_t i = 0; i < n; i += 8) {
    __m256 v[16];
    for (int s = 0; s < 16; ++s) v[s] = _mm256_loadu_ps(rows + s * ld + i);
    for (int s = 0; s < 8; ++s) v[s] = _mm256_add_ps(v[8 + s], v[s]);  // as reduce_add_16_avx2, lane-wise
    for (int s = 0; s < 4; ++s) v[s] = _mm256_add_ps(v[4 + s], v[s]);
    _mm256_storeu_ps(out + i, _mm256_add_ps(_mm256_add_ps(v[0], v[2]), _mm256_add_ps(v[1], v[3])));
  }
}

void exp_shifted_ggml_avx2(int64_t n, float* w, float max) {
  const __m256 vmax = _mm256_set1_ps(max);
  for (int64_t i = 0; i < n; i += 8)
    _mm256_storeu_ps(w + i, expf_ggml_avx512_x8(_mm256_sub_ps(_mm256_loadu_ps(w + i), vmax)));
}

}  // namespace kiln::quant
