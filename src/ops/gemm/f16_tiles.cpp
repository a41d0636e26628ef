// The scalar kernel of the F16 prompt family (layouts.h): the oracle of the AVX2 kernel
// (bit-identical: the same sixteen lane sums, FMAs and reduction, one output at a time).
#include <cmath>

#include "core/half.h"
#include "ops/gemm/layouts.h"

namespace kiln::gemm {

void convert_act_f16_wide(const float* x, void* dst, int64_t k) {
  auto* wide = static_cast<float*>(dst);
  auto* half = reinterpret_cast<uint16_t*>(wide + k);
  f32_to_f16_row(x, half, k);
  for (int64_t j = 0; j < k; ++j) wide[j] = f16_to_f32(half[j]);
}

void gemm_f16(const Tile& t) {
  for (int64_t r = 0; r < t.n_act; ++r) {
    const auto* a = reinterpret_cast<const float*>(t.act + static_cast<size_t>(r) * t.act_stride);
    for (int64_t i = 0; i < t.n_rows; ++i) {
      const auto* w = reinterpret_cast<const uint16_t*>(t.w + static_cast<size_t>(i) * t.w_stride);
      float acc[16] = {};
      for (int64_t l = 0; l < t.k; l += 16)
        for (int j = 0; j < 16; ++j) acc[j] = std::fma(f16_to_f32(w[l + j]), a[l + j], acc[j]);
      float lanes[8];
      for (int j = 0; j < 8; ++j) lanes[j] = acc[j + 8] + acc[j];
      *out_ptr(t, r, i) = reduce_lanes8(lanes);
    }
  }
}

}  // namespace kiln::gemm
