#include "convert/tensor_map.h"

#include <charconv>
#include <string_view>
#include <utility>
#include <vector>

namespace kiln::convert {

namespace {

bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

}  // namespace

Result<std::optional<MappedName>> map_tensor_name(const std::string& hf, const HfModelConfig& c) {
  if (ends_with(hf, ".rotary_emb.inv_freq")) return std::optional<MappedName>();
  if (hf == "model.embed_tokens.weight") return std::optional<MappedName>(MappedName{"token_embd.weight"});
  if (hf == "model.norm.weight") return std::optional<MappedName>(MappedName{"output_norm.weight"});
  if (hf == "lm_head.weight") return std::optional<MappedName>(MappedName{"output.weight"});

  constexpr std::string_view kLayers = "model.layers.";
  if (hf.rfind(kLayers, 0) == 0) {
    const std::string_view rest = std::string_view(hf).substr(kLayers.size());
    int64_t bid = -1;
    const auto [end, ec] = std::from_chars(rest.data(), rest.data() + rest.size(), bid);
    if (ec == std::errc() && end != rest.data() && *end == '.' && bid >= 0 && bid < c.n_layer) {
      const std::string_view leaf(end + 1, rest.data() + rest.size() - (end + 1));
      static const std::vector<std::pair<std::string_view, std::string_view>> kMap = {
          {"input_layernorm.weight", "attn_norm.weight"},
          {"self_attn.q_proj.weight", "attn_q.weight"},
          {"self_attn.k_proj.weight", "attn_k.weight"},
          {"self_attn.v_proj.weight", "attn_v.weight"},
          {"self_attn.o_proj.weight", "attn_output.weight"},
          {"self_attn.q_proj.bias", "attn_q.bias"},
          {"self_attn.k_proj.bias", "attn_k.bias"},
          {"self_attn.v_proj.bias", "attn_v.bias"},
          {"self_attn.q_norm.weight", "attn_q_norm.weight"},
          {"self_attn.k_norm.weight", "attn_k_norm.weight"},
          {"post_attention_layernorm.weight", "ffn_norm.weight"},
          {"mlp.gate_proj.weight", "ffn_gate.weight"},
          {"mlp.up_proj.weight", "ffn_up.weight"},
          {"mlp.down_proj.weight", "ffn_down.weight"},
      };
      for (const auto& [from, to] : kMap) {
        if (leaf != from) continue;
        // q/k norms belong to qwen3 only; biases to qwen2 (and llama with attention_bias).
        if (ends_with(from, "_norm.weight") && from.rfind("self_attn.", 0) == 0 && c.gguf_arch != "qwen3") break;
        MappedName m{"blk." + std::to_string(bid) + "." + std::string(to)};
        if (c.permute_qk) {
          if (from.rfind("self_attn.q_proj.", 0) == 0) m.permute = RowPermute::Q;
          if (from.rfind("self_attn.k_proj.", 0) == 0) m.permute = RowPermute::K;
        }
        return std::optional<MappedName>(std::move(m));
      }
    }
  }
  return make_error("convert: tensor '", hf, "' has no GGUF name for architecture ", c.hf_arch, " (", c.n_layer,
                    " layers)");
}

void permute_rows(float* data, int64_t rows, int64_t cols, int64_t n_head) {
  KILN_ASSERT(n_head > 0 && rows % (2 * n_head) == 0, "permute_rows: rows not a multiple of 2 * n_head");
  const int64_t hd = rows / n_head;
  const int64_t half = hd / 2;
  std::vector<float> head(static_cast<size_t>(hd * cols));
  for (int64_t h = 0; h < n_head; ++h) {
    float* base = data + h * hd * cols;
    head.assign(base, base + hd * cols);
    for (int64_t i = 0; i < half; ++i) {
      for (int64_t j = 0; j < 2; ++j) {
        const float* src = head.data() + (j * half + i) * cols;
        std::copy(src, src + cols, base + (2 * i + j) * cols);
      }
    }
  }
}

DType tensor_out_type(const std::string& gguf_name, int n_dims, int64_t ne0, OutType out) {
  if (n_dims <= 1 || ends_with(gguf_name, "_norm.weight")) return DType::F32;
  switch (out) {
    case OutType::F32: return DType::F32;
    case OutType::F16: return DType::F16;
    case OutType::BF16: return DType::BF16;
    case OutType::Q8_0: return ne0 % block_size(DType::Q8_0) == 0 ? DType::Q8_0 : DType::F16;
  }
  return DType::F32;
}

uint32_t file_type_id(OutType out) {
  switch (out) {
    case OutType::F32: return 0;   // ALL_F32
    case OutType::F16: return 1;   // MOSTLY_F16
    case OutType::Q8_0: return 7;  // MOSTLY_Q8_0
    case OutType::BF16: return 32; // MOSTLY_BF16
  }
  return 0;
}

}  // namespace kiln::convert
