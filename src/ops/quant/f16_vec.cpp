#include "ops/quant/f16_vec.h"

#include <cmath>

#include "core/half.h"
#include "ops/quant/kernels.h"

namespace kiln::quant {

void f16_mad_avx2(int64_t n, uint16_t* y, const uint16_t* x, float v);  // f16_vec_avx2.cpp
void f16_scale_avx2(int64_t n, uint16_t* y, float s);

void f16_mad(int64_t n, uint16_t* y, const uint16_t* x, float v) {
  int64_t i = 0;
  if (cpu_has_avx2()) {
    i = n / 8 * 8;
    f16_mad_avx2(i, y, x, v);
  }
  for (; i < n; ++i) y[i] = f32_to_f16(std::fma(f16_to_f32(x[i]), v, f16_to_f32(y[i])));
}

void f16_scale(int64_t n, uint16_t* y, float s) {
  int64_t i = 0;
  if (cpu_has_avx2()) {
    i = n / 8 * 8;
    f16_scale_avx2(i, y, s);
  }
  for (; i < n; ++i) y[i] = f32_to_f16(f16_to_f32(y[i]) * s);
}

}  // namespace kiln::quant
