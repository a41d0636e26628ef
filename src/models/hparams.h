// Hyperparameters of a decoder-only language model, read from GGUF metadata with llama.cpp's
// key names and defaults. Model code is configured by these at run time.
#pragma once

#include <cstdint>
#include <string>

#include "core/gguf.h"
#include "core/result.h"
#include "ops/op.h"

namespace kiln {

enum class Arch : uint8_t { Llama, Qwen2, Qwen3 };
std::string_view arch_name(Arch a);

enum class RopeScaling : uint8_t { None, Linear, Yarn };

struct HParams {
  Arch arch = Arch::Llama;
  std::string arch_key;     // "llama", "qwen2", "qwen3": the metadata key prefix
  int64_t n_vocab = 0;      // from the tokenizer's token list (or {arch}.vocab_size)
  int64_t n_ctx_train = 0;
  int64_t n_embd = 0;
  int64_t n_layer = 0;
  int64_t n_ff = 0;
  int64_t n_head = 0;
  int64_t n_head_kv = 0;
  int64_t head_dim_k = 0;   // attention.key_length, default n_embd / n_head
  int64_t head_dim_v = 0;   // attention.value_length, default head_dim_k
  int64_t n_rot = 0;        // rope.dimension_count, default head_dim_k
  float rms_eps = 1e-5f;
  // Rope. The mode follows the architecture as in llama.cpp (normal for llama, neox for qwen).
  RopeMode rope_mode = RopeMode::Normal;
  float rope_freq_base = 10000.0f;
  float rope_freq_scale = 1.0f;  // 1 / rope.scaling.factor for linear and YaRN scaling
  RopeScaling rope_scaling = RopeScaling::None;
  int64_t n_ctx_orig = 0;        // rope.scaling.original_context_length, default n_ctx_train
  float yarn_ext_factor = 0.0f;  // llama.cpp: 1 when YaRN, else 0
  float yarn_attn_factor = 1.0f;
  float yarn_beta_fast = 32.0f;
  float yarn_beta_slow = 1.0f;

  int64_t n_embd_k_gqa() const { return head_dim_k * n_head_kv; }
  int64_t n_embd_v_gqa() const { return head_dim_v * n_head_kv; }
  int64_t n_gqa() const { return n_head / n_head_kv; }
  // The rope parameters of an attention layer.
  RopeParams rope_params() const;
};

// Reads and validates the hyperparameters (positive sizes, n_head divisible by n_head_kv, sizes
// small enough that products cannot overflow). Refuses unknown architectures and
// mixture-of-experts files with a message that says so.
Result<HParams> read_hparams(const GgufFile& file);

}  // namespace kiln
