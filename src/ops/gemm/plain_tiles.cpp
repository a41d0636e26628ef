// The scalar kernel of the plain Q8_0 family (layouts.h): the oracle of the AVX2 kernel
// (bit-identical: the same lane sums, FMAs and reduction, one output at a time).
#include <cmath>

#include "core/half.h"
#include "ops/gemm/layouts.h"

namespace kiln::gemm {

void gemm_q8_0(const Tile& t) {
  const int64_t nb = t.k / 32;
  for (int64_t r = 0; r < t.n_act; ++r) {
    const auto* a = reinterpret_cast<const ActQ8_0*>(t.act + static_cast<size_t>(r) * t.act_stride);
    for (int64_t i = 0; i < t.n_rows; ++i) {
      const auto* w = reinterpret_cast<const quant::BlockQ8_0*>(t.w + static_cast<size_t>(i) * t.w_stride);
      float lanes[8] = {};
      for (int64_t b = 0; b < nb; ++b) {
        const float d = f16_to_f32(w[b].d) * a[b].d;
        for (int l = 0; l < 8; ++l) {
          int sum = 0;
          for (int e = 0; e < 4; ++e) sum += w[b].qs[4 * l + e] * a[b].qs[4 * l + e];
          lanes[l] = std::fma(d, static_cast<float>(sum), lanes[l]);
        }
      }
      *out_ptr(t, r, i) = reduce_lanes8(lanes);
    }
  }
}

}  // namespace kiln::gemm
