#include "ops/activations.h"

#include <algorithm>
#include <array>
#include <cstdint>

#include "core/half.h"
#include "ops/quant/f16_lookup.h"

namespace kiln::ops {
namespace {

using F16Table = std::array<uint16_t, 1 << 16>;

// f over every F16 value, each result rounded to F16, as ggml_cpu_init fills its tables.
F16Table f16_table_of(float (*f)(float)) {
  F16Table t{};
  for (uint32_t i = 0; i < t.size(); ++i) t[i] = f32_to_f16(f(f16_to_f32(static_cast<uint16_t>(i))));
  return t;
}

// ref: ggml_table_gelu_f16 / ggml_table_gelu_quick_f16. Built once; read-only afterwards
// (thread-safe).
const F16Table& gelu_f16_table() {
  static const F16Table table = f16_table_of(gelu_tanh_f32);
  return table;
}
const F16Table& gelu_quick_f16_table() {
  static const F16Table table = f16_table_of(gelu_quick_exact_f32);
  return table;
}

}  // namespace

float gelu_f32(float x) {
  if (x <= -10.0f) return 0.0f;
  if (x >= 10.0f) return x;
  return f16_to_f32(gelu_f16_table()[f32_to_f16(x)]);
}

float gelu_quick_f32(float x) { return f16_to_f32(gelu_quick_f16_table()[f32_to_f16(x)]); }

void gelu_row(int64_t n, float* y, const float* x) {
  constexpr int64_t kBlock = 64;
  float looked_up[kBlock];
  for (int64_t i0 = 0; i0 < n; i0 += kBlock) {
    const int64_t m = std::min(kBlock, n - i0);
    quant::f16_lookup_row(m, looked_up, x + i0, gelu_f16_table().data());
    for (int64_t i = 0; i < m; ++i) {
      const float v = x[i0 + i];
      y[i0 + i] = v <= -10.0f ? 0.0f : v >= 10.0f ? v : looked_up[i];
    }
  }
}

void gelu_quick_row(int64_t n, float* y, const float* x) {
  quant::f16_lookup_row(n, y, x, gelu_quick_f16_table().data());
}

}  // namespace kiln::ops
