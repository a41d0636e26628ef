#include "ops/cpu_features.h"

#include "ops/quant/kernels.h"

namespace kiln {

std::string cpu_kernel_features() {
  std::string s;
  if (quant::cpu_has_avx2()) s += "AVX2 FMA F16C";
  if (quant::cpu_has_avx512_vnni()) s += " AVX512F AVX512BW AVX512VL AVX512VNNI";
  return s.empty() ? "none (scalar kernels)" : s;
}

}  // namespace kiln
