// Quantized block layouts, byte-for-byte as ggml-common.h defines them (GGUF stores these blocks
// as they are). F16 scales are raw binary16 bits (core/half.h). Sizes are static_asserted below
// (the values of core/dtype.h's table; tests/quant compares the two).
#pragma once

#include <cstdint>

#include "core/dtype.h"

namespace kiln::quant {

inline constexpr int kQK4_0 = 32, kQK4_1 = 32, kQK5_0 = 32, kQK5_1 = 32, kQK8_0 = 32, kQK8_1 = 32;
inline constexpr int kQK4_NL = 32;
inline constexpr int kQK_K = 256;
inline constexpr int kKScaleSize = 12;  // packed 6-bit scales/mins of Q4_K and Q5_K

struct BlockQ4_0 {
  uint16_t d;              // delta (F16)
  uint8_t qs[kQK4_0 / 2];  // nibbles: low = element j, high = element j + 16
};
struct BlockQ4_1 {
  uint16_t d, m;  // delta, min (F16)
  uint8_t qs[kQK4_1 / 2];
};
struct BlockQ5_0 {
  uint16_t d;
  uint8_t qh[4];  // 5th bits, little-endian uint32
  uint8_t qs[kQK5_0 / 2];
};
struct BlockQ5_1 {
  uint16_t d, m;
  uint8_t qh[4];
  uint8_t qs[kQK5_1 / 2];
};
struct BlockQ8_0 {
  uint16_t d;
  int8_t qs[kQK8_0];
};
struct BlockQ8_1 {
  uint16_t d;  // delta (F16)
  uint16_t s;  // d * sum(qs) (F16)
  int8_t qs[kQK8_1];
};
struct BlockIQ4NL {
  uint16_t d;
  uint8_t qs[kQK4_NL / 2];
};

// K-quants: super-blocks of 256.
struct BlockQ2_K {
  uint8_t scales[kQK_K / 16];  // 4-bit scale (low) and 4-bit min (high) per 16 elements
  uint8_t qs[kQK_K / 4];       // 2-bit quants
  uint16_t d, dmin;            // super-block scale for scales / mins (F16)
};
struct BlockQ3_K {
  uint8_t hmask[kQK_K / 8];  // high bit of the 3-bit quants
  uint8_t qs[kQK_K / 4];     // low 2 bits
  uint8_t scales[12];        // 6-bit scales, packed
  uint16_t d;
};
struct BlockQ4_K {
  uint16_t d, dmin;
  uint8_t scales[kKScaleSize];  // 6-bit scales and mins, packed
  uint8_t qs[kQK_K / 2];
};
struct BlockQ5_K {
  uint16_t d, dmin;
  uint8_t scales[kKScaleSize];
  uint8_t qh[kQK_K / 8];
  uint8_t qs[kQK_K / 2];
};
struct BlockQ6_K {
  uint8_t ql[kQK_K / 2];      // low 4 bits
  uint8_t qh[kQK_K / 4];      // high 2 bits
  int8_t scales[kQK_K / 16];  // 8-bit scales
  uint16_t d;
};
// IQ4_XS: IQ4_NL's levels in super-blocks of 256, one 6-bit scale per 32 (stored + 32).
struct BlockIQ4XS {
  uint16_t d;                  // super-block scale (F16)
  uint16_t scales_h;           // high 2 bits of the 8 scales, 2 bits per sub-block
  uint8_t scales_l[kQK_K / 64];  // low 4 bits of the 8 scales, two per byte (even sub-block low)
  uint8_t qs[kQK_K / 2];       // per 32: low nibbles = elements 0..15, high = 16..31
};
struct BlockQ8_K {
  float d;  // F32 delta
  int8_t qs[kQK_K];
  int16_t bsums[kQK_K / 16];  // sums of qs per 16
};

static_assert(sizeof(BlockQ4_0) == 18 && sizeof(BlockQ4_1) == 20 && sizeof(BlockQ5_0) == 22);
static_assert(sizeof(BlockQ5_1) == 24 && sizeof(BlockQ8_0) == 34 && sizeof(BlockQ8_1) == 36);
static_assert(sizeof(BlockIQ4NL) == 18);
static_assert(sizeof(BlockQ2_K) == 84 && sizeof(BlockQ3_K) == 110 && sizeof(BlockQ4_K) == 144);
static_assert(sizeof(BlockIQ4XS) == 136);
static_assert(sizeof(BlockQ5_K) == 176 && sizeof(BlockQ6_K) == 210 && sizeof(BlockQ8_K) == 292);
static_assert(kQK_K == kiln::kQK_K);

}  // namespace kiln::quant
