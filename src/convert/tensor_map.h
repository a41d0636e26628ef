// Hugging Face tensor names -> GGUF tensor names (llama.cpp's gguf-py tensor map for the llama,
// qwen2 and qwen3 architectures), the Q/K row permutation, and the per-tensor output type rule.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "convert/hf_config.h"
#include "core/dtype.h"
#include "core/result.h"

namespace kiln::convert {

// How a tensor's rows are reordered before writing.
enum class RowPermute { None, Q, K };

struct MappedName {
  std::string gguf_name;
  RowPermute permute = RowPermute::None;
};

// The GGUF name for an HF tensor; nullopt for tensors llama.cpp drops (rotary_emb.inv_freq);
// an Error naming the tensor when it has no mapping for this architecture.
Result<std::optional<MappedName>> map_tensor_name(const std::string& hf_name, const HfModelConfig& c);

// Reorders the rows of a [rows, cols] row-major matrix (or a [rows] vector, cols = 1) in place,
// from HF's rotate_half layout to GGML's interleaved rope layout, per head of n_head heads.
// ref: convert_hf_to_gguf.py LlamaModel.permute:
//   w.reshape(n_head, 2, rows / n_head / 2, cols).swapaxes(1, 2).reshape(rows, cols)
// i.e. new row h*hd + 2*i + j = old row h*hd + j*hd/2 + i (hd = rows / n_head).
// Preconditions (asserted): rows % (2 * n_head) == 0.
void permute_rows(float* data, int64_t rows, int64_t cols, int64_t n_head);

enum class OutType { F32, F16, BF16, Q8_0 };

// The GGUF type of a tensor for an output type, as convert_hf_to_gguf.py chooses it: 1-D
// tensors and *_norm.weight stay F32; Q8_0 falls back to F16 when ne0 is not a multiple of 32.
DType tensor_out_type(const std::string& gguf_name, int n_dims, int64_t ne0, OutType out);

// llama.cpp's general.file_type (LlamaFileType) for an output type.
uint32_t file_type_id(OutType out);

}  // namespace kiln::convert
