// Q4_K in eight-row groups (layouts.h): preparation and the scalar kernel (the portable path, and
// the oracle of the SIMD ones).
#include <cmath>
#include <cstring>

#include "core/half.h"
#include "ops/gemm/layouts.h"
#include "ops/quant/search.h"

namespace kiln::gemm {

void prepare_q4_Kx8(const char* rows, size_t row_bytes, int64_t n_rows, int64_t k, uint8_t* dst) {
  const int64_t nsb = k / 256;
  for (int64_t g = 0; g < n_rows / 8; ++g) {
    uint8_t* group = dst + static_cast<size_t>(g * nsb) * kQ4_Kx8SuperBytes;
    for (int i = 0; i < 8; ++i) {
      const auto* blocks =
          reinterpret_cast<const quant::BlockQ4_K*>(rows + static_cast<size_t>(8 * g + i) * row_bytes);
      for (int64_t s = 0; s < nsb; ++s) {
        uint8_t* super = group + static_cast<size_t>(s) * kQ4_Kx8SuperBytes;
        auto& h = *reinterpret_cast<Q4Kx8Header*>(super);
        uint8_t* q = super + sizeof(Q4Kx8Header);
        std::memcpy(&h.d[i], &blocks[s].d, 2);
        std::memcpy(&h.dmin[i], &blocks[s].dmin, 2);
        for (int j = 0; j < 8; ++j)
          quant::get_scale_min_k4(j, blocks[s].scales, &h.scales[j][i], &h.mins[j / 2][i][j % 2]);
        for (int p = 0; p < 4; ++p)
          for (int m = 0; m < 8; ++m)
            std::memcpy(q + p * 256 + m * 32 + i * 4, blocks[s].qs + 32 * p + 4 * m, 4);
      }
    }
  }
}

void gemm_q4_Kx8(const Tile& t) {
  const int64_t nsb = t.k / 256;
  for (int64_t g = 0; g < t.n_rows / 8; ++g) {
    const char* group = t.w + static_cast<size_t>(g) * t.w_stride;
    for (int64_t r = 0; r < t.n_act; ++r) {
      const auto* a =
          reinterpret_cast<const quant::BlockQ8_K*>(t.act + static_cast<size_t>(r) * t.act_stride);
      const bool prompt_order = r < t.n_gemm_act;
      float out[8];
      for (int i = 0; i < 8; ++i) {
        float acc = 0.0f, acc_min = 0.0f;
        for (int64_t s = 0; s < nsb; ++s) {
          const char* super = group + static_cast<size_t>(s) * kQ4_Kx8SuperBytes;
          const auto& h = *reinterpret_cast<const Q4Kx8Header*>(super);
          const auto* q = reinterpret_cast<const uint8_t*>(super) + sizeof(Q4Kx8Header);
          const float d = f16_to_f32(h.d[i]) * a[s].d;
          const float dmin = f16_to_f32(h.dmin[i]) * a[s].d;
          int isum = 0, imin = 0;
          for (int p = 0; p < 4; ++p) {
            // Sub-blocks 2p (low nibbles) and 2p + 1 (high nibbles).
            int pair_sum = 0, pair_min = 0;
            for (int j = 2 * p; j < 2 * p + 2; ++j) {
              const int shift = 4 * (j % 2);
              int dot = 0;
              for (int m = 0; m < 8; ++m)
                for (int e = 0; e < 4; ++e)
                  dot += ((q[p * 256 + m * 32 + i * 4 + e] >> shift) & 0x0F) *
                         a[s].qs[32 * j + 4 * m + e];
              pair_sum += h.scales[j][i] * dot;
              pair_min += h.mins[p][i][j % 2] * (a[s].bsums[2 * j] + a[s].bsums[2 * j + 1]);
            }
            if (prompt_order) {
              acc = std::fma(static_cast<float>(pair_sum), d, acc);
              acc_min = std::fma(static_cast<float>(pair_min), dmin, acc_min);
            } else {
              isum += pair_sum;
              imin += pair_min;
            }
          }
          if (!prompt_order) {
            acc = std::fma(static_cast<float>(isum), d, acc);
            acc_min = std::fma(static_cast<float>(imin), dmin, acc_min);
          }
        }
        out[i] = acc - acc_min;
      }
      store8(t, r, 8 * g, out);
    }
  }
}

}  // namespace kiln::gemm
