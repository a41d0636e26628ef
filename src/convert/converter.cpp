#include "convert/converter.h"

#include <algorithm>
#include <cctype>
#include <cstring>
#include <filesystem>
#include <set>
#include <vector>

#include "convert/hf_config.h"
#include "convert/hf_vocab.h"
#include "core/json_file.h"
#include "convert/progress_bar.h"
#include "core/safetensors.h"
#include "core/gguf.h"
#include "core/half.h"
#include "ops/quant/quant.h"

namespace kiln::convert {

namespace {

namespace fs = std::filesystem;

constexpr uint32_t kGgmlQuantVersion = 2;  // general.quantization_version, as gguf-py writes it

struct PlannedTensor {
  const SafetensorsTensor* src = nullptr;
  std::string name;
  DType type = DType::F32;
  std::vector<int64_t> ne;  // GGUF order: ne[0] innermost = the last PyTorch dimension
  RowPermute permute = RowPermute::None;
};

Result<std::vector<PlannedTensor>> plan_tensors(const SafetensorsCheckpoint& ck, const HfModelConfig& c, OutType out) {
  std::vector<PlannedTensor> plan;
  std::set<std::string> names;
  for (const SafetensorsTensor* t : ck.tensors()) {
    KILN_ASSIGN_OR_RETURN(auto mapped, map_tensor_name(t->name, c));
    if (!mapped) continue;
    if (t->dtype != "F32" && t->dtype != "F16" && t->dtype != "BF16")
      return make_error("convert: tensor '", t->name, "' has dtype ", t->dtype, "; only F32, F16 and BF16 convert");
    if (t->shape.empty() || t->shape.size() > static_cast<size_t>(kMaxDims))
      return make_error("convert: tensor '", t->name, "' has ", t->shape.size(), " dimensions (1 to ", kMaxDims, " convert)");
    PlannedTensor p;
    p.src = t;
    p.name = mapped->gguf_name;
    p.permute = mapped->permute;
    p.ne.assign(t->shape.rbegin(), t->shape.rend());
    if (p.permute != RowPermute::None) {
      const int64_t heads = p.permute == RowPermute::Q ? c.n_head : c.n_head_kv;
      if (t->shape[0] != heads * c.head_dim || t->shape[0] % (2 * heads) != 0)
        return make_error("convert: tensor '", t->name, "' has ", t->shape[0], " rows but ", heads, " heads of ", c.head_dim,
                          " need ", heads * c.head_dim);
    }
    if (!names.insert(p.name).second) return make_error("convert: two tensors map to GGUF name '", p.name, "'");
    p.type = tensor_out_type(p.name, static_cast<int>(p.ne.size()), p.ne[0], out);
    plan.push_back(std::move(p));
  }
  if (!names.count("token_embd.weight")) return make_error("convert: checkpoint has no model.embed_tokens.weight");
  return plan;
}

// The tensor's bytes in its GGUF type.
Result<std::vector<uint8_t>> convert_tensor(const PlannedTensor& p, const HfModelConfig& c) {
  KILN_ASSIGN_OR_RETURN(std::vector<float> f, tensor_to_f32(*p.src));
  const int64_t ne0 = p.ne[0];
  const int64_t nrows = ne0 ? p.src->nelements() / ne0 : 0;
  if (p.permute != RowPermute::None) {
    const int64_t rows = p.src->shape[0];
    const int64_t cols = rows ? p.src->nelements() / rows : 0;
    permute_rows(f.data(), rows, cols, p.permute == RowPermute::Q ? c.n_head : c.n_head_kv);
  }
  std::vector<uint8_t> out(row_size(p.type, ne0) * static_cast<size_t>(nrows));
  switch (p.type) {
    case DType::F32:
      if (!f.empty()) std::memcpy(out.data(), f.data(), out.size());
      break;
    case DType::F16: f32_to_f16_row(f.data(), reinterpret_cast<uint16_t*>(out.data()), static_cast<int64_t>(f.size())); break;
    case DType::BF16: f32_to_bf16_row(f.data(), reinterpret_cast<uint16_t*>(out.data()), static_cast<int64_t>(f.size())); break;
    default: quantize_chunk(p.type, f.data(), out.data(), nrows, ne0, nullptr); break;
  }
  return out;
}

}  // namespace

Result<OutType> parse_out_type(std::string_view s) {
  std::string l(s);
  std::transform(l.begin(), l.end(), l.begin(), [](unsigned char ch) { return static_cast<char>(std::tolower(ch)); });
  if (l == "f32") return OutType::F32;
  if (l == "f16") return OutType::F16;
  if (l == "bf16") return OutType::BF16;
  if (l == "q8_0") return OutType::Q8_0;
  return make_error("convert: unknown output type '", s, "' (f32, f16, bf16, q8_0)");
}

Result<ConvertSummary> convert_hf_checkpoint(const ConvertOptions& o) {
  const fs::path dir(o.hf_dir);
  KILN_ASSIGN_OR_RETURN(nlohmann::json config_json, read_json_file((dir / "config.json").string()));
  KILN_ASSIGN_OR_RETURN(HfModelConfig c, parse_hf_config(config_json, (dir / "config.json").string()));
  KILN_ASSIGN_OR_RETURN(SafetensorsCheckpoint ck, SafetensorsCheckpoint::open(o.hf_dir));
  KILN_ASSIGN_OR_RETURN(std::vector<PlannedTensor> plan, plan_tensors(ck, c, o.out_type));

  GgufWriter w;
  w.set_string("general.architecture", c.gguf_arch);
  w.set_string("general.type", "model");
  std::string name = fs::weakly_canonical(dir).filename().string();
  w.set_string("general.name", name);
  write_hparams(c, w);
  w.set_u32("general.file_type", file_type_id(o.out_type));
  w.set_u32("general.quantization_version", kGgmlQuantVersion);
  KILN_TRY(write_vocab(o.hf_dir, c, w));

  for (const PlannedTensor& p : plan) KILN_TRY(w.add_tensor(p.name, p.type, p.ne));
  KILN_TRY(w.begin(o.out_path));
  ConvertSummary summary{c.gguf_arch, static_cast<int64_t>(plan.size()), 0};
  ProgressBar bar("convert", plan.size(), o.progress);
  for (size_t i = 0; i < plan.size(); ++i) {
    bar.update(i, plan[i].name);
    KILN_ASSIGN_OR_RETURN(std::vector<uint8_t> bytes, convert_tensor(plan[i], c));
    KILN_TRY(w.write_tensor_data(bytes));
    summary.data_bytes += bytes.size();
  }
  bar.update(plan.size(), "done");
  bar.finish();
  KILN_TRY(w.finish());
  return summary;
}

}  // namespace kiln::convert
