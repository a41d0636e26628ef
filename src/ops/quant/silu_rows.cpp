#include "ops/quant/silu_rows.h"

#include "ops/activations.h"
#include "ops/quant/kernels.h"
#include "ops/quant/simd_math.h"

namespace kiln::quant {

float silu_ggml_at(int64_t i, int64_t n, float x) {
  return silu_vectorised(i, n) ? silu_ggml_avx512(x) : ops::silu_f32(x);
}

void silu_row_ggml(int64_t n, float* y, const float* x) {
  const int64_t nv = n - n % 16;
  int64_t i = 0;
  if (cpu_has_avx2()) {
    silu_ggml_avx2(nv, y, x);
    i = nv;
  }
  for (; i < nv; ++i) y[i] = silu_ggml_avx512(x[i]);
  for (; i < n; ++i) y[i] = ops::silu_f32(x[i]);
}

void swiglu_row_ggml(int64_t n, float* y, const float* x, const float* g) {
  const int64_t nv = n - n % 16;
  int64_t i = 0;
  if (cpu_has_avx2()) {
    swiglu_ggml_avx2(nv, y, x, g);
    i = nv;
  }
  for (; i < nv; ++i) y[i] = silu_ggml_avx512(x[i]) * g[i];
  for (; i < n; ++i) y[i] = ops::silu_f32(x[i]) * g[i];
}

}  // namespace kiln::quant
