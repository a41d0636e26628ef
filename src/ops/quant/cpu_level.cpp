// The kernel level (kernels.h): the CPU's features, read once, lowered by KILN_CPU. Compiled for
// the baseline ISA, so that the check itself runs on any x86-64.
#include <cstdlib>
#include <cstring>

#include "ops/quant/kernels.h"

namespace kiln::quant {
namespace {

#if defined(__x86_64__) || defined(__i386__)
CpuLevel detect() {
  if (!(__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c")))
    return CpuLevel::Scalar;
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") &&
      __builtin_cpu_supports("avx512vnni"))
    return CpuLevel::Avx512;
  return CpuLevel::Avx2;
}
bool detect_bf16() { return __builtin_cpu_supports("avx512bf16"); }
#else
CpuLevel detect() { return CpuLevel::Scalar; }
bool detect_bf16() { return false; }
#endif

// KILN_CPU's level, or nullptr when it is unset or not one of the names.
const CpuLevel* requested_level() {
  static const CpuLevel levels[] = {CpuLevel::Scalar, CpuLevel::Avx2, CpuLevel::Avx512};
  const char* want = std::getenv("KILN_CPU");
  if (want == nullptr) return nullptr;
  for (const CpuLevel& l : levels)
    if (std::strcmp(want, cpu_level_name(l)) == 0) return &l;
  return nullptr;
}

}  // namespace

const char* cpu_level_name(CpuLevel level) {
  switch (level) {
    case CpuLevel::Scalar:
      return "scalar";
    case CpuLevel::Avx2:
      return "avx2";
    case CpuLevel::Avx512:
      return "avx512";
  }
  return "?";
}

CpuLevel cpu_detected_level() {
  static const CpuLevel level = detect();
  return level;
}

CpuLevel cpu_level() {
  static const CpuLevel level = [] {
    const CpuLevel* want = requested_level();
    return want != nullptr && *want < cpu_detected_level() ? *want : cpu_detected_level();
  }();
  return level;
}

const char* cpu_level_unknown_request() {
  const char* want = std::getenv("KILN_CPU");
  return want == nullptr || requested_level() != nullptr ? nullptr : want;
}

bool cpu_has_avx2() { return cpu_level() >= CpuLevel::Avx2; }
bool cpu_has_avx512_vnni() { return cpu_level() >= CpuLevel::Avx512; }
bool cpu_has_avx512_bf16() {
  static const bool has = cpu_has_avx512_vnni() && detect_bf16();
  return has;
}

}  // namespace kiln::quant
