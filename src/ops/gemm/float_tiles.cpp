// The scalar kernels of the float prompt families (layouts.h: F16, BF16 and F32 weights in
// tinyBLAS's order, plain or in the Split16 layout): the oracles of the AVX2 kernels (bit-identical:
// the same sixteen lane sums, FMAs and reduction, one output at a time); the families' activation
// conversions, and the Split16 layout's preparation.
#include <cmath>
#include <cstring>

#include "core/check.h"
#include "core/half.h"
#include "ops/gemm/layouts.h"
#include "ops/quant/kernels.h"

namespace kiln::gemm {
namespace {

// Rounds x through the 16-bit format (as the type's vec_dot_type conversion does), then stores the
// widened values (k floats) followed by the 16-bit ones (k values), in the plain order.
template <void (*ToHalf)(const float*, uint16_t*, int64_t), float (*Widen)(uint16_t)>
void convert_act_wide(const float* x, void* dst, int64_t k) {
  auto* wide = static_cast<float*>(dst);
  auto* half = reinterpret_cast<uint16_t*>(wide + k);
  ToHalf(x, half, k);
  for (int64_t i = 0; i < k; ++i) wide[i] = Widen(half[i]);
}

// Rounds x through the 16-bit format, value e stored at split16_pos(e, k) (k 16-bit values).
template <void (*ToHalf)(const float*, uint16_t*, int64_t)>
void convert_act_half_split16(const float* x, void* dst, int64_t k) {
  auto* half = static_cast<uint16_t*>(dst);
  for (int64_t j = 0; j < k; j += 8) ToHalf(x + j, half + quant::split16_pos(j, k), 8);
}

float f32_value(const char* row, int64_t j) {
  float v;
  std::memcpy(&v, row + j * static_cast<int64_t>(sizeof(float)), sizeof(v));
  return v;
}
template <float (*Widen)(uint16_t)>
float half_value(const char* row, int64_t j) {
  uint16_t h;
  std::memcpy(&h, row + j * static_cast<int64_t>(sizeof(h)), sizeof(h));
  return Widen(h);
}

// Weight row i's value e, widened to F32 (exact), is WValue(row_i, at(e)); activation row r's is
// AValue(act_r, at(e)).
template <float (*WValue)(const char*, int64_t), float (*AValue)(const char*, int64_t), class Pos>
void gemm_tinyblas(const Tile& t, Pos at) {
  for (int64_t r = 0; r < t.n_act; ++r) {
    const char* a = t.act + static_cast<size_t>(r) * t.act_stride;
    for (int64_t i = 0; i < t.n_rows; ++i) {
      const char* w = t.w + static_cast<size_t>(i) * t.w_stride;
      float acc[16] = {};
      for (int64_t l = 0; l < t.k; l += 16)
        for (int j = 0; j < 16; ++j) acc[j] = std::fma(WValue(w, at(l + j)), AValue(a, at(l + j)), acc[j]);
      float lanes[8];
      for (int j = 0; j < 8; ++j) lanes[j] = acc[j + 8] + acc[j];
      *out_ptr(t, r, i) = reduce_lanes8(lanes);
    }
  }
}

}  // namespace

void convert_act_f16_wide(const float* x, void* dst, int64_t k) {
  convert_act_wide<f32_to_f16_row, f16_to_f32>(x, dst, k);
}
void convert_act_bf16_wide(const float* x, void* dst, int64_t k) {
  convert_act_wide<f32_to_bf16_row, bf16_to_f32>(x, dst, k);
}
void convert_act_f16_split16(const float* x, void* dst, int64_t k) {
  convert_act_half_split16<f32_to_f16_row>(x, dst, k);
}
void convert_act_bf16_split16(const float* x, void* dst, int64_t k) {
  convert_act_half_split16<f32_to_bf16_row>(x, dst, k);
}
void convert_act_f32_split16(const float* x, void* dst, int64_t k) {
  auto* out = static_cast<float*>(dst);
  for (int64_t j = 0; j < k; j += 8) std::memcpy(out + quant::split16_pos(j, k), x + j, 8 * sizeof(float));
}

namespace {

// prepare_split16 for values of kValueBytes: eight values (half a step) per copy, of a size the
// compiler knows (a library call per 16 bytes took as long as the page faults of the copy).
template <size_t kValueBytes>
void split_rows(const char* rows, size_t row_bytes, int64_t n_rows, int64_t k, uint8_t* dst) {
  constexpr size_t kGroup = 8 * kValueBytes;
  for (int64_t i = 0; i < n_rows; ++i) {
    const char* src = rows + static_cast<size_t>(i) * row_bytes;
    uint8_t* out = dst + static_cast<size_t>(i) * row_bytes;
    for (int64_t j = 0; j < k; j += 8)
      std::memcpy(out + static_cast<size_t>(quant::split16_pos(j, k)) * kValueBytes,
                  src + static_cast<size_t>(j) * kValueBytes, kGroup);
  }
}

}  // namespace

void prepare_split16(const char* rows, size_t row_bytes, int64_t n_rows, int64_t k, size_t value_bytes,
                     uint8_t* dst) {
  KILN_ASSERT(value_bytes == 2 || value_bytes == 4, "prepare_split16: values of 2 or 4 bytes");
  if (value_bytes == 2) {
    split_rows<2>(rows, row_bytes, n_rows, k, dst);
  } else {
    split_rows<4>(rows, row_bytes, n_rows, k, dst);
  }
}

// Plain families: activations widened (their F32 copy first); split ones: the weights' type.
void gemm_f16(const Tile& t) { gemm_tinyblas<half_value<f16_to_f32>, f32_value>(t, quant::PlainPos{}); }
void gemm_bf16(const Tile& t) { gemm_tinyblas<half_value<bf16_to_f32>, f32_value>(t, quant::PlainPos{}); }
void gemm_f32(const Tile& t) { gemm_tinyblas<f32_value, f32_value>(t, quant::PlainPos{}); }
void gemm_f16_split16(const Tile& t) {
  gemm_tinyblas<half_value<f16_to_f32>, half_value<f16_to_f32>>(t, quant::Split16Pos{t.k});
}
void gemm_bf16_split16(const Tile& t) {
  gemm_tinyblas<half_value<bf16_to_f32>, half_value<bf16_to_f32>>(t, quant::Split16Pos{t.k});
}
void gemm_f32_split16(const Tile& t) { gemm_tinyblas<f32_value, f32_value>(t, quant::Split16Pos{t.k}); }

}  // namespace kiln::gemm
