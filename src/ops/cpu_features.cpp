#include "ops/cpu_features.h"

#include "ops/quant/kernels.h"

namespace kiln {

std::string cpu_kernel_features() {
  using quant::CpuLevel;
  const CpuLevel level = quant::cpu_level();
  std::string s = quant::cpu_level_name(level);
  if (level == CpuLevel::Scalar) s += " (no SIMD kernels)";
  if (level == CpuLevel::Avx2) s += " (AVX2 FMA F16C)";
  if (level == CpuLevel::Avx512) {
    s += " (AVX2 FMA F16C AVX512F AVX512BW AVX512VL AVX512DQ AVX512VNNI";
    s += quant::cpu_has_avx512_bf16() ? " AVX512BF16)" : ")";
  }
  if (level != quant::cpu_detected_level())
    s += std::string("; KILN_CPU lowered it from ") + quant::cpu_level_name(quant::cpu_detected_level());
  if (const char* bad = quant::cpu_level_unknown_request())
    s += std::string("; KILN_CPU='") + bad + "' ignored (scalar, avx2 or avx512)";
  return s;
}

}  // namespace kiln
