// The CPU instruction-set extensions kiln's kernels use on the running machine: the SIMD variants
// chosen at run time from the CPU's features (ops/quant/traits.cpp), for `kiln --version` and logs.
#pragma once

#include <string>

namespace kiln {

// e.g. "AVX2 FMA F16C", "AVX2 FMA F16C AVX512F AVX512BW AVX512VL AVX512VNNI", or
// "none (scalar kernels)".
std::string cpu_kernel_features();

}  // namespace kiln
