// Quantizes a GGUF model the way llama.cpp's `llama-quantize` does: the same tensor order and
// per-tensor types (quantize/policy.h), the same bytes (ops/quant/quant.h) and the same metadata
// (the source's keys, general.quantization_version and general.file_type moved to the end).
//
// Memory: one tensor at a time (its F32 copy and its quantized bytes); the source is mmap'd.
// Not covered: requantizing an already quantized tensor to another type (llama.cpp refuses it
// too unless --allow-requantize), split files, and the user overrides of llama-quantize.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "core/dtype.h"
#include "core/gguf.h"
#include "core/result.h"
#include "quantize/preset.h"

namespace kiln::quantize {

// Importance weights by tensor name (llama.cpp's imatrix): for a tensor [ne0, ne1, ne2], ne0 * ne2
// non-negative finite floats, one weight per column of each of its ne2 matrices.
using ImportanceMap = std::map<std::string, std::vector<float>, std::less<>>;

// Reported after each tensor is written (from the calling thread).
struct TensorProgress {
  size_t index = 0;  // 0-based position in the output file
  size_t count = 0;  // tensors in the file
  std::string_view name;
  DType src_type = DType::F32;
  DType dst_type = DType::F32;
  uint64_t src_bytes = 0;
  uint64_t dst_bytes = 0;
  bool fell_back = false;  // the preset's type did not fit the row length (see policy.h)
};

struct QuantizeOptions {
  Preset preset;
  int n_threads = 0;                       // worker threads; 0 = std::thread::hardware_concurrency()
  const ImportanceMap* imatrix = nullptr;  // nullable; must outlive the call
  std::function<void(const TensorProgress&)> on_tensor = nullptr;  // optional
};

struct QuantizeSummary {
  size_t n_tensors = 0;
  size_t n_converted = 0;  // tensors whose type changed
  size_t n_fallback = 0;   // tensors that took a fallback type
  uint64_t src_tensor_bytes = 0;
  uint64_t dst_tensor_bytes = 0;
  uint64_t n_elements = 0;            // over all tensors (for bits per weight)
  std::vector<std::string> warnings;  // imatrix entries missing or ignored, as llama.cpp warns
};

// Quantizes `src` into a new file at `out_path`. Errors name the tensor and the numbers: a source
// tensor holding NaN/Inf, a type that cannot be converted, an imatrix of the wrong size, a row
// length no type fits, or an I/O failure.
Result<QuantizeSummary> quantize_gguf(const GgufFile& src, const std::string& out_path,
                                      const QuantizeOptions& options);

// Converts a Stable Diffusion model file (its tensors as one GgufFile with stable-diffusion.cpp's
// names: a GGUF, or a safetensors file as models/sd/weight_file.h packs it) into a GGUF at
// `out_path` as stable-diffusion.cpp's `convert` does for `type` (quantize/sd_policy.h: which
// tensors take `type`, the others keep theirs): the tensors in the source's order, no metadata,
// each quantized with importance weights of 1 as stable-diffusion.cpp quantizes it, so the file is
// byte for byte its `convert`'s. options.preset and options.imatrix are not read. Errors: a type kiln cannot
// write, a tensor already quantized that would change type, non-finite values, I/O.
Result<QuantizeSummary> quantize_sd(const GgufFile& src, const std::string& out_path, DType type,
                                    const QuantizeOptions& options);

}  // namespace kiln::quantize
