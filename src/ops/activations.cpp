#include "ops/activations.h"

#include <array>
#include <cstdint>

#include "core/half.h"

namespace kiln::ops {
namespace {

// ref: ggml_cpu_init's ggml_table_gelu_f16. Built once; read-only afterwards (thread-safe).
const std::array<uint16_t, 1 << 16>& gelu_f16_table() {
  static const std::array<uint16_t, 1 << 16> table = [] {
    std::array<uint16_t, 1 << 16> t{};
    for (uint32_t i = 0; i < t.size(); ++i) {
      t[i] = f32_to_f16(gelu_tanh_f32(f16_to_f32(static_cast<uint16_t>(i))));
    }
    return t;
  }();
  return table;
}

}  // namespace

float gelu_f32(float x) {
  if (x <= -10.0f) return 0.0f;
  if (x >= 10.0f) return x;
  return f16_to_f32(gelu_f16_table()[f32_to_f16(x)]);
}

}  // namespace kiln::ops
