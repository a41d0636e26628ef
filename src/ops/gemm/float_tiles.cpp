// The scalar kernels of the float prompt families (layouts.h: F16, BF16 and F32 weights in
// tinyBLAS's order): the oracles of the AVX2 kernels (bit-identical: the same sixteen lane sums,
// FMAs and reduction, one output at a time).
#include <cmath>
#include <cstring>

#include "core/half.h"
#include "ops/gemm/layouts.h"

namespace kiln::gemm {
namespace {

// Rounds x through the 16-bit format (as the type's vec_dot_type conversion does), then stores the
// widened values (k floats) followed by the 16-bit ones (k values).
template <void (*ToHalf)(const float*, uint16_t*, int64_t), float (*Widen)(uint16_t)>
void convert_act_wide(const float* x, void* dst, int64_t k) {
  auto* wide = static_cast<float*>(dst);
  auto* half = reinterpret_cast<uint16_t*>(wide + k);
  ToHalf(x, half, k);
  for (int64_t j = 0; j < k; ++j) wide[j] = Widen(half[j]);
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

// Weight row i's value j, widened to F32 (exact), is Value(row_i, j); activations are F32.
template <float (*Value)(const char*, int64_t)>
void gemm_tinyblas(const Tile& t) {
  for (int64_t r = 0; r < t.n_act; ++r) {
    const auto* a = reinterpret_cast<const float*>(t.act + static_cast<size_t>(r) * t.act_stride);
    for (int64_t i = 0; i < t.n_rows; ++i) {
      const char* w = t.w + static_cast<size_t>(i) * t.w_stride;
      float acc[16] = {};
      for (int64_t l = 0; l < t.k; l += 16)
        for (int j = 0; j < 16; ++j) acc[j] = std::fma(Value(w, l + j), a[l + j], acc[j]);
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

void gemm_f16(const Tile& t) { gemm_tinyblas<half_value<f16_to_f32>>(t); }
void gemm_bf16(const Tile& t) { gemm_tinyblas<half_value<bf16_to_f32>>(t); }
void gemm_f32(const Tile& t) { gemm_tinyblas<f32_value>(t); }

}  // namespace kiln::gemm
