#include "convert/hf_config.h"

#include "core/json_file.h"

namespace kiln::convert {

namespace {

using json = nlohmann::json;

// A positive integer field, or an Error naming it.
Result<int64_t> positive_int(const json& j, const char* key, const std::string& label) {
  auto it = j.find(key);
  if (it == j.end()) return make_error("convert: ", label, ": missing '", key, "'");
  if (!it->is_number_integer() || it->get<int64_t>() <= 0 || it->get<int64_t>() > (int64_t{1} << 31))
    return make_error("convert: ", label, ": '", key, "' = ", it->dump(), " is not a positive integer below 2^31");
  return it->get<int64_t>();
}

std::optional<double> optional_number(const json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end() || !it->is_number()) return std::nullopt;
  return it->get<double>();
}

Result<HfModelConfig> parse_config_fields(const json& j, const std::string& label) {
  if (!j.is_object()) return make_error("convert: ", label, ": not a JSON object");
  HfModelConfig c;
  auto archs = j.find("architectures");
  if (archs == j.end() || !archs->is_array() || archs->empty() || !(*archs)[0].is_string())
    return make_error("convert: ", label, ": no 'architectures' list");
  c.hf_arch = (*archs)[0].get<std::string>();
  if (c.hf_arch == "LlamaForCausalLM" || c.hf_arch == "MistralForCausalLM") {
    c.gguf_arch = "llama";
    c.permute_qk = true;
  } else if (c.hf_arch == "Qwen2ForCausalLM") {
    c.gguf_arch = "qwen2";
  } else if (c.hf_arch == "Qwen3ForCausalLM") {
    c.gguf_arch = "qwen3";
  } else {
    return make_error("convert: ", label, ": architecture '", c.hf_arch,
                      "' is not supported (LlamaForCausalLM, MistralForCausalLM, Qwen2ForCausalLM, Qwen3ForCausalLM)");
  }
  KILN_ASSIGN_OR_RETURN(c.n_vocab, positive_int(j, "vocab_size", label));
  KILN_ASSIGN_OR_RETURN(c.n_embd, positive_int(j, "hidden_size", label));
  KILN_ASSIGN_OR_RETURN(c.n_layer, positive_int(j, "num_hidden_layers", label));
  KILN_ASSIGN_OR_RETURN(c.n_ff, positive_int(j, "intermediate_size", label));
  KILN_ASSIGN_OR_RETURN(c.n_head, positive_int(j, "num_attention_heads", label));
  KILN_ASSIGN_OR_RETURN(c.n_ctx, positive_int(j, "max_position_embeddings", label));
  c.n_head_kv = c.n_head;
  if (j.contains("num_key_value_heads") && !j["num_key_value_heads"].is_null()) {
    KILN_ASSIGN_OR_RETURN(c.n_head_kv, positive_int(j, "num_key_value_heads", label));
  }
  if (c.n_head % c.n_head_kv != 0)
    return make_error("convert: ", label, ": num_attention_heads ", c.n_head, " is not a multiple of num_key_value_heads ",
                      c.n_head_kv);
  if (j.contains("head_dim") && !j["head_dim"].is_null()) {
    KILN_ASSIGN_OR_RETURN(c.head_dim, positive_int(j, "head_dim", label));
    c.head_dim_in_config = true;
  } else {
    if (c.n_embd % c.n_head != 0)
      return make_error("convert: ", label, ": hidden_size ", c.n_embd, " is not a multiple of num_attention_heads ", c.n_head);
    c.head_dim = c.n_embd / c.n_head;
  }
  if (c.permute_qk && c.head_dim % 2 != 0)
    return make_error("convert: ", label, ": head_dim ", c.head_dim, " is odd; rotary embeddings need pairs");
  c.rms_eps = optional_number(j, "rms_norm_eps");
  c.rope_theta = optional_number(j, "rope_theta");
  c.tie_word_embeddings = j.value("tie_word_embeddings", false);

  auto rs = j.find("rope_scaling");
  if (rs != j.end() && rs->is_object()) {
    std::string type = rs->value("rope_type", rs->value("type", std::string()));
    const auto factor = optional_number(*rs, "factor");
    if (type == "default" || type.empty()) {
      // no scaling
    } else if (type == "linear" && c.gguf_arch == "llama" && factor) {
      c.rope_scaling_type = "linear";
      c.rope_scaling_factor = *factor;
    } else if (type == "yarn" && factor) {
      c.rope_scaling_type = "yarn";
      c.rope_scaling_factor = *factor;
      if (auto o = optional_number(*rs, "original_max_position_embeddings")) c.rope_scaling_orig_ctx = static_cast<int64_t>(*o);
    } else {
      return make_error("convert: ", label, ": rope_scaling ", rs->dump(), " is not supported for ", c.hf_arch,
                        " (supported: linear for llama/mistral, yarn)");
    }
  }
  c.raw = j;
  return c;
}

}  // namespace

Result<HfModelConfig> parse_hf_config(const json& j, const std::string& label) {
  return json_guard("convert: " + label, [&] { return parse_config_fields(j, label); });
}

void write_hparams(const HfModelConfig& c, GgufWriter& w) {
  const std::string a = c.gguf_arch;
  w.set_u32(a + ".block_count", static_cast<uint32_t>(c.n_layer));
  w.set_u32(a + ".context_length", static_cast<uint32_t>(c.n_ctx));
  w.set_u32(a + ".embedding_length", static_cast<uint32_t>(c.n_embd));
  w.set_u32(a + ".feed_forward_length", static_cast<uint32_t>(c.n_ff));
  w.set_u32(a + ".attention.head_count", static_cast<uint32_t>(c.n_head));
  w.set_u32(a + ".attention.head_count_kv", static_cast<uint32_t>(c.n_head_kv));
  if (c.rope_theta) w.set_f32(a + ".rope.freq_base", static_cast<float>(*c.rope_theta));
  if (c.rms_eps) w.set_f32(a + ".attention.layer_norm_rms_epsilon", static_cast<float>(*c.rms_eps));
  if (c.head_dim_in_config) {
    w.set_u32(a + ".attention.key_length", static_cast<uint32_t>(c.head_dim));
    w.set_u32(a + ".attention.value_length", static_cast<uint32_t>(c.head_dim));
  }
  if (c.gguf_arch == "llama") {  // LlamaModel adds these two
    w.set_u32(a + ".vocab_size", static_cast<uint32_t>(c.n_vocab));
    w.set_u32(a + ".rope.dimension_count", static_cast<uint32_t>(c.head_dim));
  }
  if (!c.rope_scaling_type.empty()) {
    w.set_string(a + ".rope.scaling.type", c.rope_scaling_type);
    w.set_f32(a + ".rope.scaling.factor", static_cast<float>(c.rope_scaling_factor));
    if (c.rope_scaling_orig_ctx) w.set_u32(a + ".rope.scaling.original_context_length", static_cast<uint32_t>(*c.rope_scaling_orig_ctx));
  }
}

}  // namespace kiln::convert
