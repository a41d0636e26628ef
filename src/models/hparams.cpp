#include "models/hparams.h"

#include <cmath>

namespace kiln {
namespace {

constexpr int64_t kMaxDim = int64_t{1} << 24;  // far above any real model; keeps products in range

Result<int64_t> required(const GgufFile& f, const std::string& key) {
  auto v = f.get_i64(key);
  if (!v.ok()) return make_error("model: ", v.error().message);
  if (*v <= 0 || *v > kMaxDim) return make_error("model: '", key, "' = ", *v, " is out of range [1, ", kMaxDim, "]");
  return *v;
}

Result<int64_t> optional_int(const GgufFile& f, const std::string& key, int64_t fallback) {
  if (f.find(key) == nullptr) return fallback;
  auto v = f.get_i64(key);
  if (!v.ok()) return make_error("model: ", v.error().message);
  if (*v <= 0 || *v > kMaxDim) return make_error("model: '", key, "' = ", *v, " is out of range [1, ", kMaxDim, "]");
  return *v;
}

Result<float> optional_float(const GgufFile& f, const std::string& key, float fallback) {
  if (f.find(key) == nullptr) return fallback;
  auto v = f.get_f32(key);
  if (!v.ok()) return make_error("model: ", v.error().message);
  if (!std::isfinite(*v)) return make_error("model: '", key, "' is not a finite number");
  return *v;
}

}  // namespace

std::string_view arch_name(Arch a) {
  switch (a) {
    case Arch::Llama: return "llama";
    case Arch::Qwen2: return "qwen2";
    case Arch::Qwen3: return "qwen3";
  }
  return "?";
}

RopeParams HParams::rope_params() const {
  RopeParams r;
  r.n_dims = static_cast<int32_t>(n_rot);
  r.mode = rope_mode;
  r.n_ctx_orig = static_cast<int32_t>(n_ctx_orig);
  r.freq_base = rope_freq_base;
  r.freq_scale = rope_freq_scale;
  r.ext_factor = yarn_ext_factor;
  r.attn_factor = yarn_attn_factor;
  r.beta_fast = yarn_beta_fast;
  r.beta_slow = yarn_beta_slow;
  return r;
}

Result<HParams> read_hparams(const GgufFile& f) {
  HParams h;
  auto arch = f.get_string("general.architecture");
  if (!arch.ok()) return make_error("model: ", arch.error().message);
  h.arch_key = *arch;
  if (h.arch_key == "llama") {
    h.arch = Arch::Llama;
    h.rope_mode = RopeMode::Normal;
  } else if (h.arch_key == "qwen2") {
    h.arch = Arch::Qwen2;
    h.rope_mode = RopeMode::Neox;
  } else if (h.arch_key == "qwen3") {
    h.arch = Arch::Qwen3;
    h.rope_mode = RopeMode::Neox;
  } else {
    return make_error("model: architecture '", h.arch_key, "' is not supported (supported: llama, qwen2, qwen3)");
  }
  const std::string p = h.arch_key + ".";
  if (f.find(p + "expert_count") != nullptr) {
    auto experts = f.get_i64(p + "expert_count");
    if (!experts.ok() || *experts > 0)
      return make_error("model: this '", h.arch_key,
                        "' file has experts (mixture-of-experts, e.g. Mixtral); mixture-of-experts is not supported yet");
  }
  KILN_ASSIGN_OR_RETURN(h.n_embd, required(f, p + "embedding_length"));
  KILN_ASSIGN_OR_RETURN(h.n_layer, required(f, p + "block_count"));
  KILN_ASSIGN_OR_RETURN(h.n_ff, required(f, p + "feed_forward_length"));
  KILN_ASSIGN_OR_RETURN(h.n_head, required(f, p + "attention.head_count"));
  KILN_ASSIGN_OR_RETURN(h.n_ctx_train, required(f, p + "context_length"));
  KILN_ASSIGN_OR_RETURN(h.n_head_kv, optional_int(f, p + "attention.head_count_kv", h.n_head));
  if (h.n_head % h.n_head_kv != 0)
    return make_error("model: head_count ", h.n_head, " is not a multiple of head_count_kv ", h.n_head_kv);
  KILN_ASSIGN_OR_RETURN(h.head_dim_k, optional_int(f, p + "attention.key_length", h.n_embd / h.n_head));
  KILN_ASSIGN_OR_RETURN(h.head_dim_v, optional_int(f, p + "attention.value_length", h.head_dim_k));
  KILN_ASSIGN_OR_RETURN(h.n_rot, optional_int(f, p + "rope.dimension_count", h.head_dim_k));
  if (h.n_rot > h.head_dim_k || h.n_rot % 2 != 0)
    return make_error("model: rope.dimension_count ", h.n_rot, " must be even and at most the head size ", h.head_dim_k);
  KILN_ASSIGN_OR_RETURN(h.rms_eps, optional_float(f, p + "attention.layer_norm_rms_epsilon", 1e-5f));
  KILN_ASSIGN_OR_RETURN(h.rope_freq_base, optional_float(f, p + "rope.freq_base", 10000.0f));

  // Rope scaling: rope.scaling.type ("none", "linear", "yarn") and factor; the legacy
  // rope.scale_linear key means linear scaling.
  float factor = 1.0f;
  std::string scaling = "none";
  if (f.find(p + "rope.scaling.type") != nullptr) {
    auto t = f.get_string(p + "rope.scaling.type");
    if (!t.ok()) return make_error("model: ", t.error().message);
    scaling = *t;
  }
  KILN_ASSIGN_OR_RETURN(factor, optional_float(f, p + "rope.scaling.factor", 1.0f));
  if (f.find(p + "rope.scale_linear") != nullptr) {
    KILN_ASSIGN_OR_RETURN(factor, optional_float(f, p + "rope.scale_linear", 1.0f));
    if (scaling == "none") scaling = "linear";
  }
  if (scaling == "none") {
    h.rope_scaling = RopeScaling::None;
  } else if (scaling == "linear") {
    h.rope_scaling = RopeScaling::Linear;
  } else if (scaling == "yarn") {
    h.rope_scaling = RopeScaling::Yarn;
  } else {
    return make_error("model: rope scaling type '", scaling, "' is not supported (none, linear, yarn)");
  }
  if (h.rope_scaling != RopeScaling::None) {
    if (!(factor > 0.0f)) return make_error("model: rope.scaling.factor ", factor, " must be positive");
    h.rope_freq_scale = 1.0f / factor;
  }
  KILN_ASSIGN_OR_RETURN(h.n_ctx_orig, optional_int(f, p + "rope.scaling.original_context_length", h.n_ctx_train));
  if (h.rope_scaling == RopeScaling::Yarn) {
    // ref: llama.cpp: ext_factor defaults to 1 for YaRN; attn_factor from the file or 1;
    // beta_fast / beta_slow from rope.scaling.yarn_beta_fast / _slow or 32 / 1.
    h.yarn_ext_factor = 1.0f;
    KILN_ASSIGN_OR_RETURN(h.yarn_attn_factor, optional_float(f, p + "rope.scaling.attn_factor", 1.0f));
    KILN_ASSIGN_OR_RETURN(h.yarn_beta_fast, optional_float(f, p + "rope.scaling.yarn_beta_fast", 32.0f));
    KILN_ASSIGN_OR_RETURN(h.yarn_beta_slow, optional_float(f, p + "rope.scaling.yarn_beta_slow", 1.0f));
  }

  if (f.find("tokenizer.ggml.tokens") != nullptr) {
    const GgufValue* tokens = f.find("tokenizer.ggml.tokens");
    if (tokens->type != GgufType::ARRAY) return make_error("model: tokenizer.ggml.tokens is not an array");
    h.n_vocab = static_cast<int64_t>(tokens->arr.size());
  } else {
    KILN_ASSIGN_OR_RETURN(h.n_vocab, required(f, p + "vocab_size"));
  }
  if (h.n_vocab <= 0 || h.n_vocab > kMaxDim) return make_error("model: vocabulary size ", h.n_vocab, " out of range");
  return h;
}

}  // namespace kiln
