// Element-by-element forms of the vectorised math of ggml's AVX-512 CPU build (the build that
// llama.cpp's reference outputs come from), for kernels that must reproduce its rounding.
// ggml applies these to whole vectors of 16 values and libm (expf) to the leftovers of a row.
#pragma once

#include <cmath>

namespace kiln::quant {

// e^x. ref: ggml_v_expf, __AVX512F__ variant (ggml-cpu/vec.h); _mm512_scalef_ps by the integral n
// equals ldexp. Differs from expf by up to a few ulp.
inline float expf_ggml_avx512(float x) {
  const float r = 0x1.8p23f;
  const float z = std::fma(x, 0x1.715476p+0f, r);
  const float n = z - r;
  const float b = std::fma(-n, 0x1.7f7d1cp-20f, std::fma(-n, 0x1.62e4p-1f, x));
  if (std::isnan(n)) return n;
  if (std::fabs(n) > 192.0f) return n <= 0.0f ? 0.0f : INFINITY;
  const float u = b * b;
  const float j = std::fma(std::fma(std::fma(0x1.0e4020p-7f, b, 0x1.573e2ep-5f), u,
                                    std::fma(0x1.555e66p-3f, b, 0x1.fffdb6p-2f)),
                           u, std::fma(0x1.ffffecp-1f, b, 1.0f));
  return std::ldexp(j, static_cast<int>(n));
}

// x / (1 + e^-x). ref: ggml_v_silu, __AVX512F__ variant (ggml-cpu/vec.h).
inline float silu_ggml_avx512(float x) { return x / (1.0f + expf_ggml_avx512(0.0f - x)); }

}  // namespace kiln::quant
