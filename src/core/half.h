// F16 (IEEE binary16) and BF16 (bfloat16) <-> F32 conversions, bit-exact with ggml on x86.
//
// f32_to_f16 rounds to nearest, ties to even, as the F16C instruction vcvtps2ph (imm 0) does:
// overflow goes to +-Inf, small values to F16 subnormals or signed zero, and a NaN keeps its sign
// and the top 10 bits of its payload with the quiet bit set. f16_to_f32 is exact (a NaN keeps
// its payload, quieted, as vcvtph2ps does).
// f32_to_bf16 is ggml_compute_fp32_to_bf16: round to nearest even on the upper 16 bits, a NaN is
// truncated and forced quiet (bit 6 of the result). bf16_to_f32 is exact.
// All functions are pure and thread-safe.
#pragma once

#include <bit>
#include <cstdint>

namespace kiln {

inline float f16_to_f32(uint16_t h) {
  // ref: Maratos' FP16 (fp16_ieee_to_fp32_value): branch-free; normals and Inf/NaN by rescaling the
  // shifted bits (the multiply keeps a NaN's payload and quiets it, as vcvtph2ps does), subnormals
  // by a magic-number subtraction. Exact for every input.
  const uint32_t w = static_cast<uint32_t>(h) << 16;
  const uint32_t sign = w & 0x80000000u;
  const uint32_t two_w = w + w;
  const float normalized = std::bit_cast<float>((two_w >> 4) + (0xE0u << 23)) * 0x1.0p-112f;
  const float denormalized = std::bit_cast<float>((two_w >> 17) | (126u << 23)) - 0.5f;
  const uint32_t bits =
      two_w < (1u << 27) ? std::bit_cast<uint32_t>(denormalized) : std::bit_cast<uint32_t>(normalized);
  return std::bit_cast<float>(sign | bits);
}

inline uint16_t f32_to_f16(float f) {
  // ref: Maratos' FP16 (as in ggml_compute_fp32_to_fp16): the F32 hardware adds and multiplies
  // round to nearest even at the F16 precision; only the NaN case differs (F16C keeps the payload).
  const uint32_t w = std::bit_cast<uint32_t>(f);
  const uint32_t shl1_w = w + w;
  const uint32_t sign = w & 0x80000000u;
  if (shl1_w > 0xff000000u) {  // NaN
    return static_cast<uint16_t>((sign >> 16) | 0x7e00u | ((w >> 13) & 0x3ffu));
  }
  const float to_inf = 0x1.0p+112f;
  const float to_zero = 0x1.0p-110f;
  float base = (std::bit_cast<float>(w & 0x7fffffffu) * to_inf) * to_zero;
  uint32_t bias = shl1_w & 0xff000000u;
  if (bias < 0x71000000u) bias = 0x71000000u;
  base = std::bit_cast<float>((bias >> 1) + 0x07800000u) + base;
  const uint32_t bits = std::bit_cast<uint32_t>(base);
  const uint32_t exp_bits = (bits >> 13) & 0x00007c00u;
  const uint32_t mantissa_bits = bits & 0x00000fffu;
  return static_cast<uint16_t>((sign >> 16) | (exp_bits + mantissa_bits));
}

inline float bf16_to_f32(uint16_t h) { return std::bit_cast<float>(static_cast<uint32_t>(h) << 16); }

inline uint16_t f32_to_bf16(float f) {
  const uint32_t u = std::bit_cast<uint32_t>(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 64u);  // NaN: quiet
  return static_cast<uint16_t>((u + (0x7fffu + ((u >> 16) & 1u))) >> 16);
}

// Row helpers over n contiguous elements; src and dst must not overlap.
void f16_to_f32_row(const uint16_t* src, float* dst, int64_t n);
void f32_to_f16_row(const float* src, uint16_t* dst, int64_t n);
void bf16_to_f32_row(const uint16_t* src, float* dst, int64_t n);
void f32_to_bf16_row(const float* src, uint16_t* dst, int64_t n);

}  // namespace kiln
