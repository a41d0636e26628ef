// Q4_0 in eight-row groups (layouts.h): preparation, the Q8_0 activation format, and the scalar
// kernel (the portable path, and the oracle of the SIMD ones).
#include <cmath>
#include <cstring>

#include "core/half.h"
#include "ops/gemm/layouts.h"
#include "ops/quant/quant.h"

namespace kiln::gemm {

void convert_act_q8_0(const float* x, void* dst, int64_t k) {
  const FromFloatFn q8_0 = quant_traits(DType::Q8_0)->from_float;  // ggml's x86 rounding
  auto* out = static_cast<ActQ8_0*>(dst);
  for (int64_t b = 0; b < k / 32; ++b) {
    quant::BlockQ8_0 blk;
    q8_0(x + 32 * b, &blk, 32);
    out[b].d = f16_to_f32(blk.d);
    int32_t sum = 0;
    for (int j = 0; j < 32; ++j) sum += blk.qs[j];
    out[b].sum8 = 8 * sum;
    std::memcpy(out[b].qs, blk.qs, 32);
  }
}

void prepare_q4_0x8(const char* rows, size_t row_bytes, int64_t n_rows, int64_t k, uint8_t* dst) {
  const int64_t nb = k / 32;
  for (int64_t g = 0; g < n_rows / 8; ++g) {
    uint8_t* group = dst + static_cast<size_t>(g * nb) * kQ4_0x8BlockBytes;
    for (int i = 0; i < 8; ++i) {
      const auto* blocks =
          reinterpret_cast<const quant::BlockQ4_0*>(rows + static_cast<size_t>(8 * g + i) * row_bytes);
      for (int64_t b = 0; b < nb; ++b) {
        uint8_t* block = group + static_cast<size_t>(b) * kQ4_0x8BlockBytes;
        std::memcpy(block + 2 * i, &blocks[b].d, 2);
        uint8_t* q = block + kQ4_0x8ScaleBytes;
        for (int m = 0; m < 4; ++m) std::memcpy(q + m * 32 + i * 4, blocks[b].qs + 4 * m, 4);
      }
    }
  }
}

void gemm_q4_0x8(const Tile& t) {
  const int64_t nb = t.k / 32;
  for (int64_t g = 0; g < t.n_rows / 8; ++g) {
    const char* group = t.w + static_cast<size_t>(g) * t.w_stride;
    for (int64_t r = 0; r < t.n_act; ++r) {
      const auto* a = reinterpret_cast<const ActQ8_0*>(t.act + static_cast<size_t>(r) * t.act_stride);
      float out[8];
      for (int i = 0; i < 8; ++i) {
        float acc = 0.0f;
        for (int64_t b = 0; b < nb; ++b) {
          const char* block = group + static_cast<size_t>(b) * kQ4_0x8BlockBytes;
          const auto* q = reinterpret_cast<const uint8_t*>(block) + kQ4_0x8ScaleBytes;
          uint16_t d;
          std::memcpy(&d, block + 2 * i, 2);
          int isum = 0;
          for (int m = 0; m < 4; ++m) {
            for (int e = 0; e < 4; ++e) {
              const uint8_t byte = q[m * 32 + i * 4 + e];
              isum += (byte & 0x0F) * a[b].qs[4 * m + e] + (byte >> 4) * a[b].qs[16 + 4 * m + e];
            }
          }
          isum -= a[b].sum8;
          acc = std::fma(static_cast<float>(isum), f16_to_f32(d) * a[b].d, acc);
        }
        out[i] = acc;
      }
      store8(t, r, 8 * g, out);
    }
  }
}

}  // namespace kiln::gemm
