// A Hugging Face config.json for a decoder-only transformer, read into the hyperparameters the
// GGUF file carries, with the key names llama.cpp's convert_hf_to_gguf.py writes.
// Supported: LlamaForCausalLM and MistralForCausalLM (both become GGUF arch "llama", with the
// Q/K row permutation), Qwen2ForCausalLM ("qwen2", attention biases), Qwen3ForCausalLM ("qwen3",
// per-head q/k RMS norms). Rope scaling: "linear" (llama, mistral) and "yarn" (all); the "llama3"
// rope type (it needs a generated rope_freqs tensor) and others are refused with an Error.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "core/gguf.h"
#include "core/result.h"

namespace kiln::convert {

struct HfModelConfig {
  std::string hf_arch;    // "LlamaForCausalLM", ...
  std::string gguf_arch;  // "llama", "qwen2", "qwen3"
  bool permute_qk = false;  // llama.cpp permutes q_proj/k_proj rows for llama-arch checkpoints
  int64_t n_vocab = 0;
  int64_t n_embd = 0;
  int64_t n_layer = 0;
  int64_t n_ff = 0;
  int64_t n_head = 0;
  int64_t n_head_kv = 0;
  int64_t n_ctx = 0;
  int64_t head_dim = 0;          // config's head_dim, else n_embd / n_head
  bool head_dim_in_config = false;  // key/value_length are written only then, as llama.cpp does
  std::optional<double> rms_eps;
  std::optional<double> rope_theta;
  bool tie_word_embeddings = false;
  std::string rope_scaling_type;  // "" (none), "linear", "yarn"
  double rope_scaling_factor = 1.0;
  std::optional<int64_t> rope_scaling_orig_ctx;
  nlohmann::json raw;  // the whole config.json (special token ids are read from it)
};

// Reads and validates config.json's fields (positive sizes, heads dividing evenly); `label`
// names the file in errors.
Result<HfModelConfig> parse_hf_config(const nlohmann::json& j, const std::string& label);

// Writes {arch}.* hyperparameters as llama.cpp's converter does.
void write_hparams(const HfModelConfig& c, GgufWriter& w);

}  // namespace kiln::convert
