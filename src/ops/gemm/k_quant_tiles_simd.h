// The tiles of the Q6_K, Q5_K, Q3_K and Q2_K families (layouts.h), written once for AVX2 and
// AVX-512 VNNI: bit-identical to k_quant_tiles.cpp's scalar kernels, each output keeping the int32
// lanes and F32 accumulators of its type's vec_dot (vec_dots_simd.h). Up to eight weight rows at a
// time: per super-block their levels and scales are unpacked once (kept in L1) and met by every
// activation row of the tile, whose accumulators wait in L1 between super-blocks; the scales
// multiply two chunks of 32 values at once (regroup), three multiplies per 64 values instead of the
// vec_dots' four. The integer steps are int_steps_simd.h's (the scales' multiply-add is vpdpwssd
// on VNNI), exact at both levels, and the float steps are the same: both levels give the same bits.
// Include only from k_quant_tiles_avx2.cpp and k_quant_tiles_avx512.cpp (internal linkage).
#pragma once

#include <immintrin.h>

#include <algorithm>
#include <cstdint>

#include "ops/gemm/avx2_util.h"
#include "ops/gemm/layouts.h"
#include "ops/quant/int_steps_simd.h"
#include "ops/quant/k_quants_avx2.h"
#include "ops/quant/kernels.h"
#include "ops/quant/prefetch.h"
#include "ops/quant/vec_dots_simd.h"

namespace kiln::gemm {
namespace {  // NOLINT: internal linkage on purpose (see above)

constexpr int64_t kActChunk = 64;  // activation rows whose accumulators a pass keeps

// Values of chunks c and c+1 (32 each) regrouped so that one vpmaddwd scales both: in every int32
// lane l, lo holds values 4l, 4l+1 of chunk c then 4l, 4l+1 of chunk c+1, hi values 4l+2, 4l+3 of
// each. vpmaddubsw of lo and of hi, added as int16 (four products of |level| <= 63 and
// |activation| <= 128: within int16), gives per lane l the pair (chunk c's four-product sum, chunk
// c+1's): the same integer terms of lane l as the vec_dot's, two chunks per multiply by scales.
struct ChunkPair {
  __m256i lo, hi;
};
inline ChunkPair regroup(__m256i c0, __m256i c1) {
  return {_mm256_blend_epi16(c0, _mm256_slli_epi32(c1, 16), 0xAA),
          _mm256_blend_epi16(_mm256_srli_epi32(c0, 16), c1, 0xAA)};
}

// Two int16 values as the two halves of an int32 (a low).
inline int32_t pack16(int16_t a, int16_t b) {
  return static_cast<int32_t>(static_cast<uint16_t>(a) | static_cast<uint32_t>(static_cast<uint16_t>(b))
                                                             << 16);
}

// The int16 scale pairs of chunks 2p, 2p+1 per int32 lane l (ChunkPair's lanes), from one scale
// per 16 values (raw: the block's 16 int8 scales sc): lanes l < 4 take the first 16 values of
// each chunk, the others the second 16.
// Chunk c = 2p has scales sc[2c] (values 0..15), sc[2c+1] (16..31); chunk c+1 the next two. One
// shuffle puts them as int16 pairs: int32 lane 2p = (sc[4p], sc[4p+2]), lane 2p+1 = (sc[4p+1],
// sc[4p+3]); out[p] takes lane 2p in its low half, lane 2p+1 in its high half.
inline void scale_pairs(__m128i raw, __m256i out[4]) {
  const __m256i pairs = _mm256_cvtepi8_epi16(
      _mm_shuffle_epi8(raw, _mm_setr_epi8(0, 2, 1, 3, 4, 6, 5, 7, 8, 10, 9, 11, 12, 14, 13, 15)));
  for (int p = 0; p < 4; ++p) {
    out[p] = _mm256_permutevar8x32_epi32(
        pairs, _mm256_setr_epi32(2 * p, 2 * p, 2 * p, 2 * p, 2 * p + 1, 2 * p + 1, 2 * p + 1, 2 * p + 1));
  }
}

// The eight chunks of 32 values of a Q2_K / Q3_K super-block's 2-bit fields: chunk 4j + k is bits
// 2k, 2k+1 of qs[32j ..].
inline void two_bit_chunks(const uint8_t* qs, __m256i lv[8]) {
  const __m256i m3 = _mm256_set1_epi8(3);
  for (int j = 0; j < 2; ++j) {
    const __m256i bits = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(qs + 32 * j));
    for (int k = 0; k < 4; ++k) lv[4 * j + k] = _mm256_and_si256(_mm256_srli_epi16(bits, 2 * k), m3);
  }
}

inline float hsum4(__m128 x) {  // hsum_float_4: (0+2, 1+3), then 0+1
  x = _mm_add_ps(x, _mm_movehl_ps(x, x));
  x = _mm_add_ss(x, _mm_movehdup_ps(x));
  return _mm_cvtss_f32(x);
}

// The float step of Q6_K's and Q3_K's vec_dots: one FMA of the super-block's int32 lanes into
// eight float lanes, summed at the end.
struct LaneSums {
  struct Acc {
    __m256 lanes;
  };
  static void add_lanes(Acc& acc, __m256i lanes, __m256 d_w, __m256 da) {
    acc.lanes = _mm256_fmadd_ps(_mm256_mul_ps(da, d_w), _mm256_cvtepi32_ps(lanes), acc.lanes);
  }
  static float result(const Acc& acc) { return hsum8(acc.lanes); }
};

// A type's unpacking and per-super-block float step (vec_dot_q6_K_q8_K_avx2's). kLevelBias: what
// the stored levels exceed the type's levels by, where the integer lanes need the latter (the
// tile subtracts kLevelBias times the activations' four-value sums); 0 where the type's own step
// handles the bias.
struct Q6K : LaneSums {
  using Block = quant::BlockQ6_K;
  static constexpr int kLevelBias = 0;
  struct Unpacked {
    ChunkPair levels[4];  // chunks 2p, 2p+1 (values 0..63, biased by 32), regrouped
    __m256i scales[4];    // int16 pairs per lane l: chunk 2p's and 2p+1's scales of values 4l..
                          // (l < 4: the first 16 of each chunk, else the second 16)
    __m256i bias32;       // the 16 scales times -32 as int16 (q6_K_bias's terms, negated)
    __m256 d;             // the super-block scale in every lane
  };
  static void unpack(const Block& b, Unpacked& u) {
    __m256i lv[8];
    quant::q6_K_levels(b.ql, b.qh, lv);
    quant::q6_K_levels(b.ql + 64, b.qh + 32, lv + 4);
    for (int p = 0; p < 4; ++p) u.levels[p] = regroup(lv[2 * p], lv[2 * p + 1]);
    const __m128i scales = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b.scales));
    scale_pairs(scales, u.scales);
    // |scale| <= 128: times 32 within int16.
    u.bias32 = _mm256_mullo_epi16(_mm256_cvtepi8_epi16(scales), _mm256_set1_epi16(-32));
    u.d = _mm256_set1_ps(_cvtsh_ss(b.d));
  }
  // The lanes' integer start: minus the bias 32 as q6_K_bias splits it (lane l: 32 * (bsums[2l] *
  // sc[2l] + bsums[2l+1] * sc[2l+1])); int32 sums are exact, so starting from it equals the
  // vec_dot's subtraction at the end.
  static __m256i start(const Unpacked& u, const quant::BlockQ8_K& a) {
    return _mm256_madd_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(a.bsums)), u.bias32);
  }
  static void add(Acc& acc, __m256i lanes, const Unpacked& u, const quant::BlockQ8_K&, __m256 da) {
    add_lanes(acc, lanes, u.d, da);
  }
  static void vec_dot(int64_t k, float* out, const Block* w, const quant::BlockQ8_K* a) {
    quant::dot_q6_K_q8_K(k, out, w, a);
  }
};

// vec_dot_q5_K_q8_K_avx2's: the mins in four more lanes, added at the end.
struct Q5K {
  using Block = quant::BlockQ5_K;
  static constexpr int kLevelBias = 0;
  struct Unpacked {
    ChunkPair levels[4];  // chunks 2p, 2p+1 (values 0..31), regrouped
    __m256i scales[4];    // int16 pairs: chunk 2p's and 2p+1's 6-bit scales, in every lane
    __m128i mins;         // the eight 6-bit mins as int16
    __m256 d;
    __m128 dmin;
  };
  struct Acc {
    __m256 lanes;
    __m128 mins;
  };
  static void unpack(const Block& b, Unpacked& u) {
    uint8_t sm[16];
    quant::k4_scales_mins(b.scales, sm);
    const __m256i m4 = _mm256_set1_epi8(0xF), m1 = _mm256_set1_epi8(1);
    const __m256i hbits = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.qh));
    for (int p = 0; p < 4; ++p) {
      // Chunk 2p: the low nibbles of qs[32p ..] with bit 2p of qh; chunk 2p+1: the high nibbles
      // with bit 2p+1.
      const __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.qs + 32 * p));
      const __m256i hl = _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hbits, 2 * p), m1), 4);
      const __m256i hh = _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hbits, 2 * p + 1), m1), 4);
      u.levels[p] = regroup(_mm256_or_si256(_mm256_and_si256(q, m4), hl),
                            _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(q, 4), m4), hh));
      u.scales[p] = _mm256_set1_epi32(pack16(sm[2 * p], sm[2 * p + 1]));
    }
    u.mins = _mm_cvtepu8_epi16(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(sm + 8)));
    u.d = _mm256_set1_ps(_cvtsh_ss(b.d));
    u.dmin = _mm_set1_ps(_cvtsh_ss(b.dmin));
  }
  static __m256i start(const Unpacked&, const quant::BlockQ8_K&) { return _mm256_setzero_si256(); }
  static void add(Acc& acc, __m256i sum, const Unpacked& u, const quant::BlockQ8_K& a, __m256 da) {
    acc.lanes = _mm256_fmadd_ps(_mm256_mul_ps(da, u.d), _mm256_cvtepi32_ps(sum), acc.lanes);
    const __m256i q8sums = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a.bsums));
    const __m128i q8s = _mm_hadd_epi16(_mm256_castsi256_si128(q8sums), _mm256_extracti128_si256(q8sums, 1));
    const __m128 dmin = _mm_mul_ps(_mm_set1_ps(-a.d), u.dmin);
    acc.mins = _mm_fmadd_ps(dmin, _mm_cvtepi32_ps(_mm_madd_epi16(u.mins, q8s)), acc.mins);
  }
  static float result(const Acc& acc) { return hsum8(acc.lanes) + hsum4(acc.mins); }
  static void vec_dot(int64_t k, float* out, const Block* w, const quant::BlockQ8_K* a) {
    quant::dot_q5_K_q8_K(k, out, w, a);
  }
};

// vec_dot_q3_K_q8_K_avx2's: levels -4..3 stored as 0..7 (kLevelBias 4), one scale per 16 values.
struct Q3K : LaneSums {
  using Block = quant::BlockQ3_K;
  static constexpr int kLevelBias = 4;
  struct Unpacked {
    ChunkPair levels[4];  // chunks 2p, 2p+1 (level + 4: the two low bits | the high bit << 2)
    __m256i scales[4];
    __m256 d;
  };
  static void unpack(const Block& b, Unpacked& u) {
    __m256i lv[8];
    two_bit_chunks(b.qs, lv);
    const __m256i m1 = _mm256_set1_epi8(1);
    const __m256i hbits = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.hmask));
    for (int c = 0; c < 8; ++c)
      lv[c] = _mm256_or_si256(lv[c], _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hbits, c), m1), 2));
    for (int p = 0; p < 4; ++p) u.levels[p] = regroup(lv[2 * p], lv[2 * p + 1]);
    scale_pairs(quant::q3_K_scales(b.scales), u.scales);
    u.d = _mm256_set1_ps(_cvtsh_ss(b.d));
  }
  static __m256i start(const Unpacked&, const quant::BlockQ8_K&) { return _mm256_setzero_si256(); }
  static void add(Acc& acc, __m256i sum, const Unpacked& u, const quant::BlockQ8_K&, __m256 da) {
    add_lanes(acc, sum, u.d, da);
  }
  static void vec_dot(int64_t k, float* out, const Block* w, const quant::BlockQ8_K* a) {
    quant::dot_q3_K_q8_K(k, out, w, a);
  }
};

// vec_dot_q2_K_q8_K_avx2's: levels 0..3, a 4-bit scale and min per 16 values; the mins' integer sum
// per super-block, times d_a * dmin_w, subtracted from a float sum added at the end.
struct Q2K {
  using Block = quant::BlockQ2_K;
  static constexpr int kLevelBias = 0;
  struct Unpacked {
    ChunkPair levels[4];
    __m256i scales[4];
    __m256i mins;  // the sixteen mins as int16
    __m256 d;
    float dmin;
  };
  struct Acc {
    __m256 lanes;
    float mins;
  };
  static void unpack(const Block& b, Unpacked& u) {
    __m256i lv[8];
    two_bit_chunks(b.qs, lv);
    for (int p = 0; p < 4; ++p) u.levels[p] = regroup(lv[2 * p], lv[2 * p + 1]);
    const __m128i sc8 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b.scales));
    scale_pairs(_mm_and_si128(sc8, _mm_set1_epi8(0xF)), u.scales);
    u.mins = _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(sc8, 4), _mm_set1_epi8(0xF)));
    u.d = _mm256_set1_ps(_cvtsh_ss(b.d));
    u.dmin = _cvtsh_ss(b.dmin);
  }
  static __m256i start(const Unpacked&, const quant::BlockQ8_K&) { return _mm256_setzero_si256(); }
  static void add(Acc& acc, __m256i sum, const Unpacked& u, const quant::BlockQ8_K& a, __m256 da) {
    const __m256i prod =
        _mm256_madd_epi16(u.mins, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a.bsums)));
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(prod), _mm256_extracti128_si256(prod, 1));
    s = _mm_add_epi32(s, _mm_srli_si128(s, 8));
    s = _mm_add_epi32(s, _mm_srli_si128(s, 4));
    acc.mins -= a.d * u.dmin * static_cast<float>(_mm_cvtsi128_si32(s));
    acc.lanes = _mm256_fmadd_ps(_mm256_mul_ps(da, u.d), _mm256_cvtepi32_ps(sum), acc.lanes);
  }
  static float result(const Acc& acc) { return hsum8(acc.lanes) + acc.mins; }
  static void vec_dot(int64_t k, float* out, const Block* w, const quant::BlockQ8_K* a) {
    quant::dot_q2_K_q8_K(k, out, w, a);
  }
};

// Weight rows i0 .. i0+NI-1 x activation rows r0 .. r0+nr-1 (nr <= kActChunk).
template <class F, int NI>
void k_quant_rows(const Tile& t, int64_t i0, int64_t r0, int64_t nr) {
  using Block = typename F::Block;
  const Block* w[NI];
  for (int i = 0; i < NI; ++i)
    w[i] = reinterpret_cast<const Block*>(t.w + static_cast<size_t>(i0 + i) * t.w_stride);
  typename F::Acc acc[NI][kActChunk];
  for (int i = 0; i < NI; ++i)
    for (int64_t r = 0; r < nr; ++r) acc[i][r] = typename F::Acc();
  for (int64_t s = 0; s < t.k / 256; ++s) {
    typename F::Unpacked u[NI];
    for (int i = 0; i < NI; ++i) F::unpack(w[i][s], u[i]);
    // The next super-blocks come from memory while this one meets the activation rows (the
    // hardware prefetcher loses these strided streams over the long pass).
    if (s + 1 < t.k / 256) {
      for (int i = 0; i < NI; ++i) quant::prefetch_block<sizeof(Block)>(&w[i][s + 1]);
    }
    for (int64_t r = 0; r < nr; ++r) {
      const auto& a =
          reinterpret_cast<const quant::BlockQ8_K*>(t.act + static_cast<size_t>(r0 + r) * t.act_stride)[s];
      // The activation row's four chunk pairs stay in registers while the NI weight rows meet them
      // one at a time (one accumulator live: no spills).
      ChunkPair q[4];
      for (int p = 0; p < 4; ++p)
        q[p] = regroup(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(a.qs + 64 * p)),
                       _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a.qs + 64 * p + 32)));
      // kLevelBias times the four-value sums of the activations, as the int16 pairs of sums16
      // (exact: 4 x 128 x kLevelBias and the products' sums stay within int16).
      __m256i bias16[4];
      if constexpr (F::kLevelBias != 0) {
        const __m256i ones = _mm256_set1_epi8(1);
        for (int p = 0; p < 4; ++p)
          bias16[p] = _mm256_mullo_epi16(
              _mm256_add_epi16(_mm256_maddubs_epi16(ones, q[p].lo), _mm256_maddubs_epi16(ones, q[p].hi)),
              _mm256_set1_epi16(F::kLevelBias));
      }
      const __m256 da = _mm256_broadcast_ss(&a.d);
#pragma GCC unroll 8
      for (int i = 0; i < NI; ++i) {
        __m256i sum = F::start(u[i], a);
        for (int p = 0; p < 4; ++p) {
          __m256i sums16 = _mm256_add_epi16(_mm256_maddubs_epi16(u[i].levels[p].lo, q[p].lo),
                                            _mm256_maddubs_epi16(u[i].levels[p].hi, q[p].hi));
          if constexpr (F::kLevelBias != 0) sums16 = _mm256_sub_epi16(sums16, bias16[p]);
          sum = quant::madd_add(sum, sums16, u[i].scales[p]);
        }
        F::add(acc[i][r], sum, u[i], a, da);
      }
    }
  }
  for (int i = 0; i < NI; ++i)
    for (int64_t r = 0; r < nr; ++r) store1(t, r0 + r, i0 + i, F::result(acc[i][r]));
}

template <class F>
void k_quant_tile(const Tile& t) {
  // Fewer activation rows than this do not pay for unpacking to L1: the vec_dot (same bits) keeps
  // the levels in registers (one-token decode: 1.9x less CPU time than the tile).
  constexpr int64_t kMinTileActs = 4;
  if (t.n_act < kMinTileActs) {
    for (int64_t r = 0; r < t.n_act; ++r)
      for (int64_t i = 0; i < t.n_rows; ++i)
        F::vec_dot(t.k, out_ptr(t, r, i),
                   reinterpret_cast<const typename F::Block*>(t.w + static_cast<size_t>(i) * t.w_stride),
                   reinterpret_cast<const quant::BlockQ8_K*>(t.act + static_cast<size_t>(r) * t.act_stride));
    return;
  }
  for (int64_t r0 = 0; r0 < t.n_act; r0 += kActChunk) {
    const int64_t nr = std::min(kActChunk, t.n_act - r0);
    int64_t i = 0;
    for (; i + 8 <= t.n_rows; i += 8) k_quant_rows<F, 8>(t, i, r0, nr);
    for (; i + 4 <= t.n_rows; i += 4) k_quant_rows<F, 4>(t, i, r0, nr);
    for (; i < t.n_rows; ++i) k_quant_rows<F, 1>(t, i, r0, nr);
  }
}

}  // namespace

}  // namespace kiln::gemm

// Defines layouts.h's gemm_q6_K_<LEVEL>, gemm_q5_K_, gemm_q3_K_ and gemm_q2_K_ (inside namespace
// kiln::gemm) for the including file's level: one list for both levels.
#define KILN_DEFINE_K_QUANT_TILES(LEVEL)                          \
  void gemm_q6_K_##LEVEL(const Tile& t) { k_quant_tile<Q6K>(t); } \
  void gemm_q5_K_##LEVEL(const Tile& t) { k_quant_tile<Q5K>(t); } \
  void gemm_q3_K_##LEVEL(const Tile& t) { k_quant_tile<Q3K>(t); } \
  void gemm_q2_K_##LEVEL(const Tile& t) { k_quant_tile<Q2K>(t); }
