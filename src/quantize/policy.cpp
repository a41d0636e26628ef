#include "quantize/policy.h"

#include <algorithm>
#include <charconv>
#include <climits>
#include <numeric>

namespace kiln::quantize {
namespace {

// Broad tensor roles, by name. ref: llama-quant.cpp tensor_get_category (same order of tests).
enum class Category {
  TokenEmbd,
  AttnQ,
  AttnV,
  AttnK,
  AttnQkv,
  AttnKvB,
  AttnOutput,
  FfnUp,
  FfnGate,
  FfnDown,
  Output,
  Other,
};

bool contains(std::string_view s, std::string_view part) { return s.find(part) != std::string_view::npos; }

Category category_of(std::string_view name) {
  if (name == "output.weight") return Category::Output;
  if (name == "token_embd.weight" || name == "per_layer_token_embd.weight") return Category::TokenEmbd;
  if (contains(name, "attn_qkv.weight")) return Category::AttnQkv;
  if (contains(name, "attn_kv_b.weight")) return Category::AttnKvB;
  if (contains(name, "attn_v.weight")) return Category::AttnV;
  if (contains(name, "attn_k.weight")) return Category::AttnK;
  if (contains(name, "attn_q.weight")) return Category::AttnQ;
  if (contains(name, "attn_output.weight")) return Category::AttnOutput;
  if (contains(name, "ffn_up")) return Category::FfnUp;
  if (contains(name, "ffn_gate")) return Category::FfnGate;
  if (contains(name, "ffn_down")) return Category::FfnDown;
  return Category::Other;
}

// attn_v-like tensors are the most sensitive to quantization and share one counter.
bool is_attn_v_like(Category c) {
  return c == Category::AttnV || c == Category::AttnQkv || c == Category::AttnKvB;
}

// ref: llama-quant.cpp use_more_bits: the first and last eighth of the layers, and every third
// layer in between, get more bits.
bool use_more_bits(int64_t i_layer, int64_t n_layers) {
  return i_layer < n_layers / 8 || i_layer >= 7 * n_layers / 8 || (i_layer - n_layers / 8) % 3 == 2;
}

// Mutable state of one pass over the tensors (llama.cpp's quantize_state_impl).
struct PolicyState {
  const ModelHparams& hp;
  FileType ftype;
  bool has_imatrix;
  bool is_falcon;
  bool is_llama_70b;
  bool has_tied_embeddings;
  int64_t n_attention_wv = 0;
  int64_t i_attention_wv = 0;
  int64_t n_ffn = 0;  // n_layer: the count behind the ffn_down / ffn_gate / ffn_up schedules
  int64_t i_ffn_down = 0;
};

// The layer a per-layer FFN rule applies to. Dense models count tensors in output order; expert
// models parse it from the name, because their expert tensors are not consecutive.
// ref: llama-quant.cpp layer_info.
Result<int64_t> ffn_layer(const PolicyState& st, int64_t counter, std::string_view name) {
  if (std::max<int64_t>(1, st.hp.n_expert) <= 1) return counter;
  const int layer = block_index(name);
  if (layer < 0 || layer >= st.n_ffn) {
    return make_error("quantize: tensor '", name, "' has layer ", layer, ", expected [0, ", st.n_ffn, ")");
  }
  return static_cast<int64_t>(layer);
}

// ref: llama-quant.cpp llama_tensor_get_type_impl, restricted to the presets of preset.h.
Result<DType> preset_rule(PolicyState& st, DType new_type, const TensorDesc& t, Category cat) {
  const FileType ft = st.ftype;
  const bool iq4 = ft == FileType::MostlyIQ4_NL || ft == FileType::MostlyIQ4_XS;
  const int64_t n_gqa = st.hp.n_gqa();
  const int64_t n_expert = st.hp.n_expert;

  if (cat == Category::Output || (st.has_tied_embeddings && cat == Category::TokenEmbd)) {
    // The output projection (and a token embedding that doubles as it) keeps more bits.
    if (st.is_falcon || t.ne[0] % block_size(new_type) != 0) {
      new_type = DType::Q8_0;
    } else if (new_type != DType::Q8_0) {
      new_type = DType::Q6_K;
    }
  } else if (is_attn_v_like(cat)) {
    if (ft == FileType::MostlyQ2_K) {
      new_type = n_gqa >= 4 ? DType::Q4_K : DType::Q3_K;
    } else if (ft == FileType::MostlyQ3_K_M) {
      new_type = st.i_attention_wv < 2 ? DType::Q5_K : DType::Q4_K;
    } else if (ft == FileType::MostlyQ3_K_L) {
      new_type = DType::Q5_K;
    } else if (iq4 && n_gqa >= 4) {
      new_type = DType::Q5_K;
    } else if ((ft == FileType::MostlyQ4_K_M || ft == FileType::MostlyQ5_K_M) &&
               use_more_bits(st.i_attention_wv, st.n_attention_wv)) {
      new_type = DType::Q6_K;
    } else if (ft == FileType::MostlyQ4_K_S && st.i_attention_wv < 4) {
      new_type = DType::Q5_K;
    }
    // 70B: 8 query heads share each attn_v head, so the tensor is small and more bits are cheap.
    if (st.is_llama_70b && (new_type == DType::Q3_K || new_type == DType::Q4_K)) new_type = DType::Q5_K;
    if (n_expert == 8) new_type = DType::Q8_0;
    ++st.i_attention_wv;
  } else if (cat == Category::AttnK) {
    if (n_expert == 8) new_type = DType::Q8_0;
  } else if (cat == Category::FfnDown) {
    KILN_ASSIGN_OR_RETURN(const int64_t i_layer, ffn_layer(st, st.i_ffn_down, t.name));
    const int64_t n_layer = st.n_ffn;
    if (ft == FileType::MostlyQ2_K) {
      new_type = DType::Q3_K;
    } else if (ft == FileType::MostlyQ3_K_M) {
      new_type = i_layer < n_layer / 16                             ? DType::Q5_K
                 : !st.is_falcon || use_more_bits(i_layer, n_layer) ? DType::Q4_K
                                                                    : DType::Q3_K;
    } else if (ft == FileType::MostlyQ3_K_L) {
      new_type = st.is_falcon ? DType::Q4_K : DType::Q5_K;
    } else if (ft == FileType::MostlyQ4_K_M) {
      if (st.is_falcon) {
        new_type = i_layer < n_layer / 16            ? DType::Q6_K
                   : use_more_bits(i_layer, n_layer) ? DType::Q5_K
                                                     : DType::Q4_K;
      } else if (use_more_bits(i_layer, n_layer)) {
        new_type = DType::Q6_K;
      }
    } else if (i_layer < n_layer / 8 && iq4 && !st.has_imatrix) {
      new_type = DType::Q5_K;
    } else if (ft == FileType::MostlyQ5_K_M && use_more_bits(i_layer, n_layer)) {
      new_type = DType::Q6_K;
    } else if (ft == FileType::MostlyQ4_K_S && !st.is_falcon && i_layer < n_layer / 8) {
      new_type = DType::Q5_K;
    } else if ((ft == FileType::MostlyQ4_0 || ft == FileType::MostlyQ5_0) && st.has_imatrix &&
               i_layer < n_layer / 8) {
      // llama.cpp guards the first ffn_down layers of Q4_0/Q5_0, only when an imatrix is given
      new_type = ft == FileType::MostlyQ4_0 ? DType::Q4_1 : DType::Q5_1;
    }
    ++st.i_ffn_down;
  } else if (cat == Category::AttnOutput) {
    if (!st.is_falcon) {
      if (n_expert == 8) {
        if (ft == FileType::MostlyQ2_K || ft == FileType::MostlyQ3_K_S || ft == FileType::MostlyQ3_K_M || iq4 ||
            ft == FileType::MostlyQ4_K_S || ft == FileType::MostlyQ4_K_M) {
          new_type = DType::Q5_K;
        }
      } else if (ft == FileType::MostlyQ2_K) {
        new_type = DType::Q3_K;
      } else if (ft == FileType::MostlyQ3_K_M) {
        new_type = DType::Q4_K;
      } else if (ft == FileType::MostlyQ3_K_L) {
        new_type = DType::Q5_K;
      }
    } else if (ft == FileType::MostlyQ3_K_L) {
      new_type = DType::Q4_K;
    }
  } else if (cat == Category::FfnGate || cat == Category::FfnUp) {
    // gate and up keep the preset's type (they change for IQ3_XS only), but llama.cpp still
    // refuses an expert tensor without a valid layer in its name
    KILN_TRY(ffn_layer(st, 0, t.name));
  }
  return new_type;
}

// A type whose block fits ne[0] when the chosen one does not. ref: tensor_type_fallback.
Result<DType> fallback_type(std::string_view name, DType target, int64_t ncols) {
  DType t = target;
  switch (target) {
    case DType::IQ4_XS:
      t = DType::IQ4_NL;
      break;
    case DType::Q2_K:
    case DType::Q3_K:
      t = DType::Q4_0;
      break;
    case DType::Q4_K:
      t = DType::Q5_0;
      break;
    case DType::Q5_K:
      t = DType::Q5_1;
      break;
    case DType::Q6_K:
      t = DType::Q8_0;
      break;
    default:
      return make_error("quantize: tensor '", name, "' has ", ncols, " columns, not a multiple of ",
                        block_size(target), " as type ", dtype_name(target), " needs, and ",
                        dtype_name(target), " has no fallback type");
  }
  // a row that is not a multiple of 32 either stays unquantized: F16
  return ncols % block_size(t) != 0 ? DType::F16 : t;
}

bool weight_name_less(const std::string& a, const std::string& b) {
  const int la = block_index(a);
  const int lb = block_index(b);
  if (la != lb) return la < lb;
  return a < b;
}

}  // namespace

int effective_dims(const std::array<int64_t, kMaxDims>& ne) {
  for (int i = kMaxDims - 1; i >= 1; --i) {
    if (ne[i] > 1) return i + 1;
  }
  return 1;
}

int block_index(std::string_view name) {
  constexpr std::string_view kPrefix = "blk.";
  if (name.substr(0, kPrefix.size()) != kPrefix) return -1;
  std::string_view rest = name.substr(kPrefix.size());
  // %d skips white space and takes an optional sign
  while (!rest.empty() && (rest[0] == ' ' || (rest[0] >= '\t' && rest[0] <= '\r'))) rest.remove_prefix(1);
  if (!rest.empty() && rest[0] == '+') rest.remove_prefix(1);
  long long v = 0;
  const auto [ptr, ec] = std::from_chars(rest.data(), rest.data() + rest.size(), v);
  if (ptr == rest.data()) return -1;
  if (ec == std::errc::result_out_of_range || v > INT_MAX || v < INT_MIN) return v < 0 ? INT_MIN : INT_MAX;
  return static_cast<int>(v);
}

bool allows_quantization(std::string_view name, const std::array<int64_t, kMaxDims>& ne) {
  if (effective_dims(ne) < 2) return false;
  constexpr std::string_view kWeight = "weight";
  // ref: tensor_allows_quantization (its rfind test: "weight" at the very end)
  if (name.size() < kWeight.size() || name.substr(name.size() - kWeight.size()) != kWeight) return false;
  static constexpr std::string_view kExcluded[] = {
      "_norm.weight",
      "ffn_gate_inp.weight",
      "ffn_gate_tid2eid.weight",
      "altup",
      "laurel",
      "per_layer_model_proj",
      "ssm_conv1d",
      "shortconv.conv.weight",
      "indexer.k_proj.weight",
      "indexer.q_proj.weight",
      "time_mix_first.weight",
      "time_mix_w0.weight",
      "time_mix_w1.weight",
      "time_mix_w2.weight",
      "time_mix_v0.weight",
      "time_mix_v1.weight",
      "time_mix_v2.weight",
      "time_mix_a0.weight",
      "time_mix_a1.weight",
      "time_mix_a2.weight",
      "time_mix_g1.weight",
      "time_mix_g2.weight",
      "time_mix_decay_w1.weight",
      "time_mix_decay_w2.weight",
      "time_mix_lerp_fused.weight",
      "attn_rel_b.weight",
      ".position_embd",
      "sam.pos_embd",
      "sam.neck.",
      "sam.net_",
      ".rel_pos",
      ".patch_embd",
      ".patch_merger",
      "a.rvq.codebook",
      "mm.a.code_embd",
  };
  for (std::string_view part : kExcluded) {
    if (contains(name, part)) return false;
  }
  // BERT-style learned position and token-type embeddings (LLM_TN names, the same in every arch)
  return name != "position_embd.weight" && name != "token_types.weight";
}

Result<ModelHparams> read_hparams(const GgufFile& file) {
  ModelHparams hp;
  KILN_ASSIGN_OR_RETURN(hp.arch, file.get_string("general.architecture"));
  const std::string prefix = hp.arch + ".";

  // A per-layer count may be a scalar or an array (one entry per layer): take layer 0's.
  auto read_count = [&](const std::string& key, int64_t fallback) -> Result<int64_t> {
    const GgufValue* v = file.find(key);
    if (v == nullptr) return fallback;
    int64_t n = 0;
    if (v->type == GgufType::ARRAY) {
      KILN_ASSIGN_OR_RETURN(std::vector<int64_t> arr, file.get_i64_array(key));
      if (arr.empty()) return make_error("quantize: key '", key, "' is an empty array");
      n = arr[0];
    } else {
      KILN_ASSIGN_OR_RETURN(n, file.get_i64(key));
    }
    if (n < 0 || n > INT32_MAX) return make_error("quantize: key '", key, "' = ", n, " is out of range");
    return n;
  };

  if (file.find(prefix + "block_count") == nullptr) {
    return make_error("quantize: key '", prefix, "block_count' is missing");
  }
  KILN_ASSIGN_OR_RETURN(hp.n_layer, read_count(prefix + "block_count", 0));
  KILN_ASSIGN_OR_RETURN(hp.n_head, read_count(prefix + "attention.head_count", 0));
  KILN_ASSIGN_OR_RETURN(hp.n_head_kv, read_count(prefix + "attention.head_count_kv", hp.n_head));
  KILN_ASSIGN_OR_RETURN(hp.n_expert, read_count(prefix + "expert_count", 0));
  return hp;
}

Result<std::vector<TensorChoice>> choose_types(const ModelHparams& hp, std::span<const TensorDesc> tensors,
                                               const PolicyOptions& options) {
  const DType default_type = options.preset.default_type;
  const bool default_quantized = info(default_type).quantized;

  PolicyState st{
      .hp = hp,
      .ftype = options.preset.file_type,
      .has_imatrix = options.has_imatrix,
      .is_falcon = hp.arch == "falcon",
      // ref: llama-model.cpp load_hparams for LLM_ARCH_LLAMA: 80 layers with GQA is LLM_TYPE_70B
      .is_llama_70b = hp.arch == "llama" && hp.n_expert != 8 && hp.n_layer == 80 && hp.n_head != hp.n_head_kv,
      .has_tied_embeddings = true,
      .n_ffn = hp.n_layer,
  };
  for (const TensorDesc& t : tensors) {
    const Category c = category_of(t.name);
    if (is_attn_v_like(c)) ++st.n_attention_wv;
    if (c == Category::Output) st.has_tied_embeddings = false;
  }

  // llama.cpp's loader keeps its tensors in a map ordered by block index, then by name.
  std::vector<size_t> order(tensors.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return weight_name_less(tensors[a].name, tensors[b].name); });

  std::vector<TensorChoice> out;
  out.reserve(order.size());
  for (size_t idx : order) {
    const TensorDesc& t = tensors[idx];
    TensorChoice choice{.source_index = idx, .type = t.type};
    if (allows_quantization(t.name, t.ne)) {
      choice.type = default_type;
      if (default_quantized) {
        KILN_ASSIGN_OR_RETURN(choice.type, preset_rule(st, default_type, t, category_of(t.name)));
        if (t.ne[0] % block_size(choice.type) != 0) {
          KILN_ASSIGN_OR_RETURN(choice.type, fallback_type(t.name, choice.type, t.ne[0]));
          choice.fell_back = true;
        }
      }
    }
    out.push_back(choice);
  }
  return out;
}

}  // namespace kiln::quantize
