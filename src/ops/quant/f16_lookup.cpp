#include "ops/quant/f16_lookup.h"

#include "core/half.h"
#include "ops/quant/kernels.h"

namespace kiln::quant {

void f16_lookup_row(int64_t n, float* y, const float* x, const uint16_t* table) {
  int64_t i = 0;
  if (cpu_has_avx2()) {
    i = n / 8 * 8;
    f16_lookup_avx2(i, y, x, table);
  }
  for (; i < n; ++i) y[i] = f16_to_f32(table[f32_to_f16(x[i])]);
}

}  // namespace kiln::quant
