// Activation quantizers as ggml's x86 CPU backend runs them (ref: ggml-cpu/arch/x86/quants.c,
// quantize_row_q8_0 / quantize_row_q8_1, AVX2 path), written as scalar code with the same results:
// the multiplier is 127/amax (not 1/d), products round half to even (_mm256_round_ps with
// _MM_ROUND_NEAREST under the default MXCSR mode), and the int32 -> int8 packing saturates.
#include <algorithm>
#include <cmath>

#include "core/half.h"
#include "ops/quant/kernels.h"
#include "ops/quant/search.h"

namespace kiln::quant {
namespace {

// Quantizes one block of 32 with x86 semantics; returns the F32 delta d and the sum of levels.
inline float quantize_block_q8_x86(const float* x, int8_t* qs, int* sum_out) {
  float amax = 0.0f;
  for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[j]));
  const float d = amax / 127.f;
  const float id = (amax != 0.0f) ? 127.f / amax : 0.0f;
  int sum = 0;
  for (int j = 0; j < 32; ++j) {
    // Ties to even, as _mm256_round_ps(_MM_ROUND_NEAREST). |x * id| <= 127 for finite blocks; an
    // infinite or NaN product converts to INT_MIN in cvtps_epi32 and saturates to -128.
    const float p = x[j] * id;
    const int v = std::isfinite(p) ? std::clamp(nearest_int(p), -128, 127) : -128;
    qs[j] = static_cast<int8_t>(v);
    sum += v;
  }
  *sum_out = sum;
  return d;
}

}  // namespace

void quantize_row_q8_0_x86(const float* x, BlockQ8_0* y, int64_t n) {
  for (int64_t i = 0; i < n / kQK8_0; ++i) {
    int sum;
    const float d = quantize_block_q8_x86(x + i * kQK8_0, y[i].qs, &sum);
    y[i].d = f32_to_f16(d);
  }
}

void quantize_row_q8_1_x86(const float* x, BlockQ8_1* y, int64_t n) {
  for (int64_t i = 0; i < n / kQK8_1; ++i) {
    int sum;
    const float d = quantize_block_q8_x86(x + i * kQK8_1, y[i].qs, &sum);
    y[i].d = f32_to_f16(d);
    y[i].s = f32_to_f16(d * static_cast<float>(sum));
  }
}

}  // namespace kiln::quant
