#include "quantize/preset.h"

#include <array>
#include <cctype>

namespace kiln::quantize {
namespace {

constexpr std::array kPresets = {
    Preset{"Q4_0", FileType::MostlyQ4_0, DType::Q4_0, "4.5 bpw, legacy"},
    Preset{"Q4_1", FileType::MostlyQ4_1, DType::Q4_1, "5.0 bpw, legacy"},
    Preset{"Q5_0", FileType::MostlyQ5_0, DType::Q5_0, "5.5 bpw, legacy"},
    Preset{"Q5_1", FileType::MostlyQ5_1, DType::Q5_1, "6.0 bpw, legacy"},
    Preset{"IQ4_NL", FileType::MostlyIQ4_NL, DType::IQ4_NL, "4.5 bpw, non-linear 4-bit"},
    Preset{"IQ4_XS", FileType::MostlyIQ4_XS, DType::IQ4_XS, "4.25 bpw, non-linear 4-bit in super-blocks"},
    Preset{"Q2_K", FileType::MostlyQ2_K, DType::Q2_K, "K-quant mix around 2.6 bpw"},
    Preset{"Q3_K_S", FileType::MostlyQ3_K_S, DType::Q3_K, "K-quant mix, 3-bit small"},
    Preset{"Q3_K_M", FileType::MostlyQ3_K_M, DType::Q3_K, "K-quant mix, 3-bit medium"},
    Preset{"Q3_K_L", FileType::MostlyQ3_K_L, DType::Q3_K, "K-quant mix, 3-bit large"},
    Preset{"Q4_K_S", FileType::MostlyQ4_K_S, DType::Q4_K, "K-quant mix, 4-bit small"},
    Preset{"Q4_K_M", FileType::MostlyQ4_K_M, DType::Q4_K, "K-quant mix, 4-bit medium (recommended)"},
    Preset{"Q5_K_S", FileType::MostlyQ5_K_S, DType::Q5_K, "K-quant mix, 5-bit small"},
    Preset{"Q5_K_M", FileType::MostlyQ5_K_M, DType::Q5_K, "K-quant mix, 5-bit medium"},
    Preset{"Q6_K", FileType::MostlyQ6_K, DType::Q6_K, "6.56 bpw"},
    Preset{"Q8_0", FileType::MostlyQ8_0, DType::Q8_0, "8.5 bpw"},
    Preset{"F16", FileType::MostlyF16, DType::F16, "16-bit IEEE half"},
    Preset{"BF16", FileType::MostlyBF16, DType::BF16, "16-bit bfloat"},
};

bool iequals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::toupper(static_cast<unsigned char>(a[i])) != std::toupper(static_cast<unsigned char>(b[i])))
      return false;
  }
  return true;
}

}  // namespace

std::span<const Preset> all_presets() { return kPresets; }

std::optional<Preset> find_preset(std::string_view name) {
  for (const Preset& p : kPresets) {
    if (iequals(p.name, name)) return p;
  }
  return std::nullopt;
}

}  // namespace kiln::quantize
