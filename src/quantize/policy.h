// The per-tensor type policy of llama.cpp's quantizer: for a preset and a model, which tensors
// are quantized, to which type, and in which order they are written.
// ref: llama.cpp src/llama-quant.cpp (tensor_allows_quantization, llama_tensor_get_type_impl,
// tensor_type_fallback, llama_model_quantize_impl) and src/llama-model-loader.h
// (weight_name_comparer: the output order).
//
// What it does not cover (kiln only offers the presets of quantize/preset.h): the IQ1/IQ2/IQ3,
// TQ and MXFP4 file types, user overrides (--tensor-type, --output-tensor-type, --pure) and
// layer pruning. The 70B rule (attn_v one step up) is detected from the hparams the way
// llama.cpp's llama loader does (llama, 80 layers, GQA, not 8 experts).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/dtype.h"
#include "core/gguf.h"
#include "core/result.h"
#include "quantize/preset.h"

namespace kiln::quantize {

// The hyperparameters the policy reads (layer 0's head counts, as llama.cpp's n_gqa() does).
struct ModelHparams {
  std::string arch;       // general.architecture
  int64_t n_layer = 0;    // {arch}.block_count
  int64_t n_head = 0;     // {arch}.attention.head_count (first entry when per layer)
  int64_t n_head_kv = 0;  // {arch}.attention.head_count_kv; n_head when absent
  int64_t n_expert = 0;   // {arch}.expert_count; 0 when absent

  int64_t n_gqa() const { return n_head_kv == 0 ? 0 : n_head / n_head_kv; }
};

// Reads ModelHparams from a GGUF file's metadata (an Error names a missing or malformed key).
Result<ModelHparams> read_hparams(const GgufFile& file);

// A source tensor as the policy sees it.
struct TensorDesc {
  std::string name;
  DType type = DType::F32;
  std::array<int64_t, kMaxDims> ne{1, 1, 1, 1};  // ne[0] = columns (elements per row)
};

struct TensorChoice {
  size_t source_index = 0;  // index into the TensorDesc list given to choose_types
  DType type = DType::F32;  // the type written to the output file
  bool fell_back = false;   // the preset's choice did not fit ne[0] and a fallback type was used
};

struct PolicyOptions {
  Preset preset;
  bool has_imatrix = false;  // importance weights were supplied (changes a few ffn_down rules)
};

// Output order and type of every tensor of `tensors` (untied token embeddings keep the preset's
// type). Errors, where llama.cpp refuses too: a row length that neither the chosen type nor its
// fallback divides (e.g. Q4_0 on 100 columns), and an expert-model FFN tensor whose name has no
// block index in [0, n_layer).
Result<std::vector<TensorChoice>> choose_types(const ModelHparams& hp, std::span<const TensorDesc> tensors,
                                               const PolicyOptions& options);

// ggml_n_dims: the dimension count without trailing dimensions of size 1 (at least 1). The
// output file records this count, as llama.cpp's writer does.
int effective_dims(const std::array<int64_t, kMaxDims>& ne);

// Whether llama.cpp quantizes a tensor of this name and shape at all: weights of 2 or more
// dimensions, except norms, routers, position/type embeddings and a list of small tensors.
bool allows_quantization(std::string_view name, const std::array<int64_t, kMaxDims>& ne);

// The block index N of a name "blk.N....", or -1 (sscanf("blk.%d.") semantics).
int block_index(std::string_view name);

}  // namespace kiln::quantize
