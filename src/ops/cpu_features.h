// The CPU instruction-set extensions kiln's kernels use on the running machine: the SIMD level
// chosen at run time from the CPU's features and KILN_CPU (ops/quant/cpu_level.cpp), for
// `kiln --version` and logs.
#pragma once

#include <string>

namespace kiln {

// e.g. "avx2 (AVX2 FMA F16C)", "avx512 (AVX2 FMA F16C AVX512F AVX512BW AVX512VL AVX512DQ
// AVX512VNNI AVX512BF16)", "scalar (no SIMD kernels)", followed where KILN_CPU lowered the level or
// was not understood by a note saying so.
std::string cpu_kernel_features();

}  // namespace kiln
