// The per-tensor type policy against llama.cpp's own choices (llama-quantize --dry-run) in
// tests/data/quant/presets.json, for models made with tools/fixtures/mkmodel.py.
#include "quantize/policy.h"

#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "quantize/preset.h"
#include "quantize/quantize.h"
#include "test_support.h"

namespace kiln::quantize {
namespace {

using testing::make_model;
using testing::quant_fixture;

using NamedTypes = std::vector<std::pair<std::string, std::string>>;

nlohmann::json load_presets_json() {
  std::ifstream f(quant_fixture("presets.json"));
  EXPECT_TRUE(f.good()) << "missing " << quant_fixture("presets.json");
  return nlohmann::json::parse(f);
}

// Where two [name, type] lists first differ, for a readable failure.
std::string first_difference(const NamedTypes& got, const NamedTypes& want) {
  for (size_t i = 0; i < std::min(got.size(), want.size()); ++i) {
    if (got[i] != want[i]) {
      std::ostringstream s;
      s << "at " << i << ": got [" << got[i].first << ", " << got[i].second << "], want [" << want[i].first
        << ", " << want[i].second << "]";
      return s.str();
    }
  }
  return "lengths " + std::to_string(got.size()) + " vs " + std::to_string(want.size());
}

NamedTypes planned(const GgufFile& file, const Preset& preset) {
  auto hp = read_hparams(file);
  EXPECT_TRUE(hp.ok()) << hp.error().message;
  std::vector<TensorDesc> descs;
  for (const GgufTensorInfo& t : file.tensors())
    descs.push_back({.name = t.name, .type = t.type, .ne = t.ne});
  auto choices = choose_types(*hp, descs, {.preset = preset});
  EXPECT_TRUE(choices.ok()) << choices.error().message;
  NamedTypes out;
  for (const TensorChoice& c : *choices) {
    out.emplace_back(descs[c.source_index].name, std::string(dtype_name(c.type)));
  }
  return out;
}

NamedTypes expected_list(const nlohmann::json& list) {
  NamedTypes out;
  for (const auto& e : list) out.emplace_back(e.at(0).get<std::string>(), e.at(1).get<std::string>());
  return out;
}

TEST(QuantizePolicy, MatchesLlamaCppForEveryShapeAndPreset) {
  const nlohmann::json doc = load_presets_json();
  const auto& shapes = doc.at("shapes");
  ASSERT_EQ(shapes.size(), 3u);
  for (const auto& [shape, spec] : shapes.items()) {
    const std::string path = make_model("policy-" + shape, spec.at("mkmodel_args").get<std::string>());
    ASSERT_FALSE(path.empty());
    auto file = GgufFile::open(path);
    ASSERT_TRUE(file.ok()) << file.error().message;
    ASSERT_EQ(spec.at("presets").size(), 16u) << shape;
    for (const auto& [preset_name, list] : spec.at("presets").items()) {
      const auto preset = find_preset(preset_name);
      ASSERT_TRUE(preset.has_value()) << preset_name;
      const NamedTypes want = expected_list(list);
      const NamedTypes got = planned(**file, *preset);
      EXPECT_EQ(got, want) << shape << " " << preset_name << ": " << first_difference(got, want);
    }
  }
}

// The whole pipeline on the shape whose row length (320) fits no K-quant: every fallback type
// is produced by the quantizers and written, in llama.cpp's order.
TEST(QuantizePolicy, FallbackTypesAreWrittenForRowsOf320) {
  const nlohmann::json doc = load_presets_json();
  const auto& spec = doc.at("shapes").at("ncols320");
  const std::string path = make_model("policy-ncols320", spec.at("mkmodel_args").get<std::string>());
  ASSERT_FALSE(path.empty());
  auto src = GgufFile::open(path);
  ASSERT_TRUE(src.ok()) << src.error().message;
  const std::string out_path = (testing::scratch_dir() / "ncols320-Q3_K_M.gguf").string();
  auto summary = quantize_gguf(**src, out_path, {.preset = *find_preset("Q3_K_M"), .n_threads = 2});
  ASSERT_TRUE(summary.ok()) << summary.error().message;
  EXPECT_GT(summary->n_fallback, 0u);
  auto out = GgufFile::open(out_path);
  ASSERT_TRUE(out.ok()) << out.error().message;
  NamedTypes got;
  for (const GgufTensorInfo& t : (*out)->tensors()) got.emplace_back(t.name, std::string(dtype_name(t.type)));
  const NamedTypes want = expected_list(spec.at("presets").at("Q3_K_M"));
  EXPECT_EQ(got, want) << first_difference(got, want);
}

TEST(QuantizePolicy, PresetNamesAreCaseInsensitive) {
  ASSERT_TRUE(find_preset("q4_k_m").has_value());
  EXPECT_EQ(find_preset("q4_k_m")->file_type, FileType::MostlyQ4_K_M);
  EXPECT_EQ(find_preset("Iq4_nl")->default_type, DType::IQ4_NL);
  EXPECT_EQ(find_preset("iq4_xs")->default_type, DType::IQ4_XS);
  EXPECT_EQ(static_cast<uint32_t>(find_preset("IQ4_XS")->file_type), 30u);  // LLAMA_FTYPE_MOSTLY_IQ4_XS
  EXPECT_FALSE(find_preset("Q4_K_X").has_value());
  EXPECT_FALSE(find_preset("").has_value());
}

TEST(QuantizePolicy, BlockIndexFollowsSscanf) {
  EXPECT_EQ(block_index("blk.12.attn_q.weight"), 12);
  EXPECT_EQ(block_index("blk.7"), 7);
  EXPECT_EQ(block_index("token_embd.weight"), -1);
  EXPECT_EQ(block_index("blk.x.attn_q.weight"), -1);
  EXPECT_EQ(block_index("blk.99999999999999999999.a"), INT_MAX);
}

TEST(QuantizePolicy, OnlyMatrixWeightsAreQuantized) {
  EXPECT_TRUE(allows_quantization("blk.0.attn_q.weight", {256, 256, 1, 1}));
  EXPECT_FALSE(allows_quantization("blk.0.attn_norm.weight", {256, 256, 1, 1}));
  EXPECT_FALSE(allows_quantization("blk.0.attn_q.weight", {256, 1, 1, 1}));  // 1-D in effect
  EXPECT_FALSE(allows_quantization("blk.0.attn_q.bias", {256, 256, 1, 1}));
  EXPECT_FALSE(allows_quantization("blk.0.ffn_gate_inp.weight", {256, 8, 1, 1}));
  EXPECT_FALSE(allows_quantization("position_embd.weight", {256, 512, 1, 1}));
  EXPECT_TRUE(allows_quantization("blk.0.ffn_down_exps.weight", {512, 256, 8, 1}));
}

// llama.cpp refuses a row length that no type (nor the 32-wide fallbacks) divides.
TEST(QuantizePolicy, RowLengthWithoutFallbackIsAnError) {
  const ModelHparams hp{.arch = "llama", .n_layer = 1, .n_head = 4, .n_head_kv = 4};
  const std::vector<TensorDesc> descs = {{.name = "blk.0.attn_q.weight", .ne = {100, 64, 1, 1}}};
  auto r = choose_types(hp, descs, {.preset = *find_preset("Q4_0")});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("blk.0.attn_q.weight"), std::string::npos) << r.error().message;
  EXPECT_NE(r.error().message.find("100"), std::string::npos) << r.error().message;
  // a K-quant falls back to Q4_0 first, then to F16 when 32 does not divide the row either
  auto k = choose_types(hp, descs, {.preset = *find_preset("Q2_K")});
  ASSERT_TRUE(k.ok()) << k.error().message;
  EXPECT_EQ((*k)[0].type, DType::F16);
  EXPECT_TRUE((*k)[0].fell_back);
}

// Expert models take the layer of an FFN tensor from its name and refuse names without one.
TEST(QuantizePolicy, ExpertTensorOutsideTheLayersIsAnError) {
  const ModelHparams hp{.arch = "llama", .n_layer = 2, .n_head = 4, .n_head_kv = 4, .n_expert = 4};
  const std::vector<TensorDesc> descs = {{.name = "blk.5.ffn_down_exps.weight", .ne = {256, 256, 4, 1}}};
  auto r = choose_types(hp, descs, {.preset = *find_preset("Q4_K_M")});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("blk.5.ffn_down_exps.weight"), std::string::npos) << r.error().message;
}

}  // namespace
}  // namespace kiln::quantize
