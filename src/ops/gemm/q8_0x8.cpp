// Q8_0 in eight-row groups (layouts.h): which weights may take the layout, preparation, the
// activation format, and the scalar kernel (the portable path, and the oracle of the SIMD one).
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "core/half.h"
#include "ops/gemm/layouts.h"
#include "ops/quant/quant.h"

namespace kiln::gemm {

bool q8_0_has_level_min(const char* rows, size_t row_bytes, int64_t n_rows, int64_t k) {
  // Eight levels at a time: x = levels ^ 0x80.. has a zero byte exactly where a level is -128
  // (0x80), and (x - 0x01..) & ~x & 0x80.. is non-zero exactly when x has a zero byte.
  constexpr uint64_t kOnes = 0x0101010101010101u, kHigh = 0x8080808080808080u;
  for (int64_t r = 0; r < n_rows; ++r) {
    const auto* blocks = reinterpret_cast<const quant::BlockQ8_0*>(rows + static_cast<size_t>(r) * row_bytes);
    uint64_t found = 0;
    for (int64_t b = 0; b < k / 32; ++b) {
      uint64_t words[4];
      std::memcpy(words, blocks[b].qs, sizeof(words));
      for (uint64_t w : words) {
        const uint64_t x = w ^ kHigh;
        found |= (x - kOnes) & ~x & kHigh;
      }
    }
    if (found != 0) return true;
  }
  return false;
}

void prepare_q8_0x8(const char* rows, size_t row_bytes, int64_t n_rows, int64_t k, uint8_t* dst) {
  const int64_t nb = k / 32;
  for (int64_t g = 0; g < n_rows / 8; ++g) {
    uint8_t* group = dst + static_cast<size_t>(g * nb) * kQ8_0x8BlockBytes;
    for (int i = 0; i < 8; ++i) {
      const auto* blocks =
          reinterpret_cast<const quant::BlockQ8_0*>(rows + static_cast<size_t>(8 * g + i) * row_bytes);
      for (int64_t b = 0; b < nb; ++b) {
        uint8_t* block = group + static_cast<size_t>(b) * kQ8_0x8BlockBytes;
        std::memcpy(block + 2 * i, &blocks[b].d, 2);
        uint8_t* q = block + kQ8_0x8ScaleBytes;
        for (int m = 0; m < 8; ++m) std::memcpy(q + m * 32 + i * 4, blocks[b].qs + 4 * m, 4);
      }
    }
  }
}

void convert_act_q8_0_abs(const float* x, void* dst, int64_t k) {
  const FromFloatFn q8_0 = quant_traits(DType::Q8_0)->from_float;  // ggml's x86 rounding
  auto* out = static_cast<ActQ8_0Abs*>(dst);
  for (int64_t b = 0; b < k / 32; ++b) {
    quant::BlockQ8_0 blk;
    q8_0(x + 32 * b, &blk, 32);
    out[b].d = f16_to_f32(blk.d);
    std::memcpy(out[b].qs, blk.qs, 32);
    for (int j = 0; j < 32; ++j) out[b].abs_qs[j] = static_cast<uint8_t>(std::abs(blk.qs[j]));
  }
}

void gemm_q8_0x8(const Tile& t) {
  const int64_t nb = t.k / 32;
  for (int64_t g = 0; g < t.n_rows / 8; ++g) {
    const char* group = t.w + static_cast<size_t>(g) * t.w_stride;
    for (int64_t r = 0; r < t.n_act; ++r) {
      const auto* a = reinterpret_cast<const ActQ8_0Abs*>(t.act + static_cast<size_t>(r) * t.act_stride);
      float out[8];
      for (int i = 0; i < 8; ++i) {
        float lanes[8] = {};
        for (int64_t b = 0; b < nb; ++b) {
          const char* block = group + static_cast<size_t>(b) * kQ8_0x8BlockBytes;
          const auto* q = reinterpret_cast<const int8_t*>(block) + kQ8_0x8ScaleBytes;
          uint16_t d;
          std::memcpy(&d, block + 2 * i, 2);
          const float dd = f16_to_f32(d) * a[b].d;
          for (int l = 0; l < 8; ++l) {
            int sum = 0;
            for (int e = 0; e < 4; ++e) sum += q[l * 32 + i * 4 + e] * a[b].qs[4 * l + e];
            lanes[l] = std::fma(dd, static_cast<float>(sum), lanes[l]);
          }
        }
        out[i] = reduce_lanes8(lanes);
      }
      store8(t, r, 8 * g, out);
    }
  }
}

}  // namespace kiln::gemm
