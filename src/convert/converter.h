// `kiln convert`: a Hugging Face checkpoint folder (config.json, *.safetensors, tokenizer files)
// -> one GGUF file that llama.cpp loads, with the metadata, tensor names, row permutations and
// per-tensor types llama.cpp's convert_hf_to_gguf.py would write (see hf_config.h, hf_vocab.h,
// tensor_map.h for what is covered).
#pragma once

#include <cstdint>
#include <string>

#include "convert/tensor_map.h"
#include "core/result.h"

namespace kiln::convert {

struct ConvertOptions {
  std::string hf_dir;
  std::string out_path;
  OutType out_type = OutType::F16;  // llama.cpp's default
  bool progress = false;            // a progress bar on stderr (only when it is a terminal)
};

struct ConvertSummary {
  std::string gguf_arch;
  int64_t n_tensors = 0;
  uint64_t data_bytes = 0;  // tensor bytes written
};

// Converts and writes options.out_path. Errors name the file, tensor or key at fault; on error
// a partly written output may remain.
Result<ConvertSummary> convert_hf_checkpoint(const ConvertOptions& options);

// Parses "f32", "f16", "bf16", "q8_0" (case-insensitive).
Result<OutType> parse_out_type(std::string_view s);

}  // namespace kiln::convert
