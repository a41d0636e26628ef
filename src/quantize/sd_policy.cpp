#include "quantize/sd_policy.h"

namespace kiln::quantize {
namespace {

bool contains(std::string_view s, std::string_view part) { return s.find(part) != std::string_view::npos; }

}  // namespace

bool sd_converts_tensor(std::string_view name, const std::array<int64_t, kMaxDims>& ne, DType type) {
  if (block_size(type) > 1 && ne[0] % block_size(type) != 0) return false;
  if (name.ends_with(".bias") || name.ends_with(".scale") || name.ends_with(".weight_scale")) return false;
  for (std::string_view kept : {"img_in.", "txt_in.", "time_in.", "vector_in.", "guidance_in.",
                                "final_layer.", "x_embedder.", "t_embedder.", "y_embedder.", "pos_embed",
                                "context_embedder.", "time_embed.", "label_emb.", "embedding"}) {
    if (contains(name, kept)) return false;
  }
  return true;
}

std::optional<DType> sd_type_from_name(std::string_view name) {
  const std::optional<DType> t = dtype_from_name(name);  // case-insensitive
  if (!t) return std::nullopt;
  for (DType sd : {DType::F32, DType::F16, DType::BF16, DType::Q8_0, DType::Q5_1, DType::Q5_0, DType::Q4_1,
                   DType::Q4_0, DType::Q6_K, DType::Q5_K, DType::Q4_K, DType::Q3_K, DType::Q2_K}) {
    if (*t == sd) return t;
  }
  return std::nullopt;
}

}  // namespace kiln::quantize
