// Quantization presets: llama.cpp's `llama-quantize` target names, the `general.file_type` value
// (llama_ftype) each one writes, and the default tensor type each one starts from before the
// per-tensor policy (quantize/policy.h) adjusts it.
// ref: llama.cpp include/llama.h (enum llama_ftype), src/llama-quant.cpp
// (llama_ftype_get_default_type), tools/quantize/quantize.cpp (QUANT_OPTIONS names).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string_view>

#include "core/dtype.h"

namespace kiln::quantize {

// llama_ftype values for the presets kiln implements (the numbers are part of the file format).
enum class FileType : uint32_t {
  MostlyF16 = 1,
  MostlyQ4_0 = 2,
  MostlyQ4_1 = 3,
  MostlyQ8_0 = 7,
  MostlyQ5_0 = 8,
  MostlyQ5_1 = 9,
  MostlyQ2_K = 10,
  MostlyQ3_K_S = 11,
  MostlyQ3_K_M = 12,
  MostlyQ3_K_L = 13,
  MostlyQ4_K_S = 14,
  MostlyQ4_K_M = 15,
  MostlyQ5_K_S = 16,
  MostlyQ5_K_M = 17,
  MostlyQ6_K = 18,
  MostlyIQ4_NL = 25,
  MostlyIQ4_XS = 30,
  MostlyBF16 = 32,
};

struct Preset {
  std::string_view name;  // llama-quantize's spelling: "Q4_K_M", "IQ4_NL", "BF16"
  FileType file_type;     // written to general.file_type
  DType default_type;     // type of every quantizable tensor before the per-tensor rules
  std::string_view description;
};

// All presets, in llama-quantize's listing order.
std::span<const Preset> all_presets();
// The preset named `name` (case-insensitive), or nullopt.
std::optional<Preset> find_preset(std::string_view name);

// ref: ggml.h GGML_QNT_VERSION, written to general.quantization_version.
inline constexpr uint32_t kQuantizationVersion = 2;

}  // namespace kiln::quantize
