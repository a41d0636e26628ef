// kiln's quantizer against files written by llama.cpp's llama-quantize from the same source
// (quant/quant-T.gguf of the test data, proven llama.cpp's bytes by tools/fixtures/make_test_data.py):
// same metadata, tensor order, types and bytes; the same file.
#include "quantize/quantize.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>

#include "core/half.h"
#include "ops/quant/quant.h"
#include "quantize/preset.h"
#include "test_support.h"

namespace kiln::quantize {
namespace {

using testing::quant_fixture;

// Every preset with a reference file in fixtures/quant (quant-T.gguf, quant-T.ref.json).
const std::vector<std::string> kFixturePresets = {"Q2_K",   "Q3_K_M", "Q4_K_M", "Q5_K_M", "Q6_K",
                                                  "Q4_0",   "Q4_1",   "Q5_0",   "Q5_1",   "Q8_0",
                                                  "IQ4_NL", "IQ4_XS", "F16",    "BF16"};

TEST(Quantize, EveryFixtureFileIsCovered) {
  size_t n = 0;
  for (const std::filesystem::path& path : test_data::files("quant", ".gguf")) {
    const std::string f = path.filename().string();
    if (f.rfind("quant-", 0) != 0 || !f.ends_with(".gguf") || f == "quant-src-f32.gguf") continue;
    const std::string preset = f.substr(6, f.size() - 6 - 5);
    EXPECT_NE(std::find(kFixturePresets.begin(), kFixturePresets.end(), preset), kFixturePresets.end()) << f;
    ++n;
  }
  EXPECT_EQ(n, kFixturePresets.size());
}

class QuantizeFixture : public ::testing::TestWithParam<std::string> {};

TEST_P(QuantizeFixture, ReproducesLlamaCppFile) {
  const std::string preset_name = GetParam();
  const auto preset = find_preset(preset_name);
  ASSERT_TRUE(preset.has_value());
  auto src = GgufFile::open(quant_fixture("quant-src-f32.gguf"));
  ASSERT_TRUE(src.ok()) << src.error().message;
  const std::string ref_path = quant_fixture("quant-" + preset_name + ".gguf");
  auto ref = GgufFile::open(ref_path);
  ASSERT_TRUE(ref.ok()) << ref.error().message;

  const std::string out_path = (testing::scratch_dir() / ("kiln-" + preset_name + ".gguf")).string();
  size_t reported = 0;
  auto summary = quantize_gguf(**src, out_path,
                               {.preset = *preset, .n_threads = 2, .on_tensor = [&](const TensorProgress& p) {
                                  EXPECT_EQ(p.index, reported);
                                  ++reported;
                                }});
  ASSERT_TRUE(summary.ok()) << summary.error().message;
  EXPECT_EQ(reported, (*src)->tensors().size());
  auto out = GgufFile::open(out_path);
  ASSERT_TRUE(out.ok()) << out.error().message;
  const GgufFile& a = **out;
  const GgufFile& b = **ref;

  // metadata: the same keys in the same order with the same values
  ASSERT_EQ(a.metadata().size(), b.metadata().size());
  for (size_t i = 0; i < a.metadata().size(); ++i) {
    EXPECT_EQ(a.metadata()[i].key, b.metadata()[i].key) << "key " << i;
    EXPECT_TRUE(testing::same_value(a.metadata()[i].value, b.metadata()[i].value)) << a.metadata()[i].key;
  }
  auto ft = a.get_u32("general.file_type");
  ASSERT_TRUE(ft.ok());
  EXPECT_EQ(*ft, static_cast<uint32_t>(preset->file_type));

  // tensors: order, type, shape, bytes (and the names and types listed in the .ref.json)
  std::ifstream ref_json_file(quant_fixture("quant-" + preset_name + ".ref.json"));
  const nlohmann::json ref_json = nlohmann::json::parse(ref_json_file);
  const auto& ref_tensors = ref_json.at("tensors");
  ASSERT_EQ(a.tensors().size(), b.tensors().size());
  ASSERT_EQ(a.tensors().size(), ref_tensors.size());
  for (size_t i = 0; i < a.tensors().size(); ++i) {
    const GgufTensorInfo& ta = a.tensors()[i];
    const GgufTensorInfo& tb = b.tensors()[i];
    EXPECT_EQ(ta.name, tb.name) << i;
    EXPECT_EQ(ta.type, tb.type) << ta.name;
    EXPECT_EQ(ta.n_dims, tb.n_dims) << ta.name;
    EXPECT_EQ(ta.ne, tb.ne) << ta.name;
    EXPECT_EQ(ta.offset, tb.offset) << ta.name;
    const auto da = a.tensor_data(ta);
    const auto db = b.tensor_data(tb);
    ASSERT_EQ(da.size(), db.size()) << ta.name;
    EXPECT_TRUE(std::equal(da.begin(), da.end(), db.begin())) << ta.name << " bytes differ";
    EXPECT_EQ(ref_tensors[i].at("name").get<std::string>(), ta.name);
    EXPECT_EQ(ref_tensors[i].at("type").get<std::string>(), dtype_name(ta.type)) << ta.name;
  }
  // and therefore the same file, byte for byte
  EXPECT_TRUE(testing::read_bytes(out_path) == testing::read_bytes(ref_path))
      << out_path << " differs from " << ref_path;
}

INSTANTIATE_TEST_SUITE_P(Presets, QuantizeFixture, ::testing::ValuesIn(kFixturePresets),
                         [](const auto& info) { return info.param; });

// Quantizing a file to its own type copies every tensor: the F16 and BF16 fixtures reproduce
// themselves (the copy path and the metadata re-ordering), from F16/BF16 sources.
TEST(Quantize, SameTypeCopiesTensors) {
  for (const std::string name : {"F16", "BF16"}) {
    const std::string ref_path = quant_fixture("quant-" + name + ".gguf");
    auto src = GgufFile::open(ref_path);
    ASSERT_TRUE(src.ok()) << src.error().message;
    const std::string out_path = (testing::scratch_dir() / ("copy-" + name + ".gguf")).string();
    auto summary = quantize_gguf(**src, out_path, {.preset = *find_preset(name), .n_threads = 1});
    ASSERT_TRUE(summary.ok()) << summary.error().message;
    EXPECT_EQ(summary->n_converted, 0u);
    EXPECT_TRUE(testing::read_bytes(out_path) == testing::read_bytes(ref_path)) << name;
  }
}

// F16 and BF16 sources are widened to F32 exactly and then quantized row by row: each output
// tensor equals one single-threaded quantize_chunk over the widened source values.
TEST(Quantize, HalfSourcesAreWidenedThenQuantized) {
  for (const std::string name : {"F16", "BF16"}) {
    auto src = GgufFile::open(quant_fixture("quant-" + name + ".gguf"));
    ASSERT_TRUE(src.ok()) << src.error().message;
    const std::string out_path = (testing::scratch_dir() / (name + "-Q4_0.gguf")).string();
    auto r = quantize_gguf(**src, out_path, {.preset = *find_preset("Q4_0"), .n_threads = 2});
    ASSERT_TRUE(r.ok()) << r.error().message;
    auto out = GgufFile::open(out_path);
    ASSERT_TRUE(out.ok()) << out.error().message;
    size_t checked = 0;
    for (const GgufTensorInfo& t : (*out)->tensors()) {
      const GgufTensorInfo* s = (*src)->find_tensor(t.name);
      ASSERT_NE(s, nullptr) << t.name;
      if (s->type == t.type) continue;
      const auto in = (*src)->tensor_data(*s);
      std::vector<float> wide(static_cast<size_t>(s->nelements()));
      for (size_t i = 0; i < wide.size(); ++i) {
        uint16_t h;
        std::memcpy(&h, in.data() + 2 * i, 2);
        wide[i] = name == "F16" ? f16_to_f32(h) : bf16_to_f32(h);
      }
      std::vector<uint8_t> want(row_size(t.type, t.ne[0]) * static_cast<size_t>(t.ne[1]));
      quantize_chunk(t.type, wide.data(), want.data(), t.ne[1], t.ne[0], nullptr);
      const auto got = (*out)->tensor_data(t);
      EXPECT_TRUE(std::equal(got.begin(), got.end(), want.begin(), want.end())) << name << " " << t.name;
      ++checked;
    }
    EXPECT_EQ(checked, 16u) << name;  // 7 matrices per layer x 2 layers, output, token_embd
  }
}

TEST(Quantize, RequantizingIsRefused) {
  auto src = GgufFile::open(quant_fixture("quant-Q4_0.gguf"));
  ASSERT_TRUE(src.ok()) << src.error().message;
  const std::string out_path = (testing::scratch_dir() / "requant.gguf").string();
  auto r = quantize_gguf(**src, out_path, {.preset = *find_preset("Q8_0"), .n_threads = 1});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("requantizing"), std::string::npos) << r.error().message;
}

// A hand-built llama file with one weight matrix holding `bad` at element 5.
std::vector<uint8_t> tiny_model(float bad) {
  GgufWriter w;
  w.set_string("general.architecture", "llama");
  w.set_u32("llama.block_count", 1);
  w.set_u32("llama.attention.head_count", 2);
  const int64_t ne[2] = {32, 4};
  EXPECT_TRUE(w.add_tensor("blk.0.attn_q.weight", DType::F32, ne).ok());
  std::vector<float> values(32 * 4, 0.25f);
  values[5] = bad;
  std::vector<uint8_t> bytes;
  EXPECT_TRUE(w.begin(bytes).ok());
  EXPECT_TRUE(w.write_tensor_data({reinterpret_cast<const uint8_t*>(values.data()), values.size() * 4}).ok());
  EXPECT_TRUE(w.finish().ok());
  return bytes;
}

TEST(Quantize, NonFiniteWeightsAreRefused) {
  for (float bad : {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity()}) {
    const std::vector<uint8_t> bytes = tiny_model(bad);
    auto src = GgufFile::parse(bytes);
    ASSERT_TRUE(src.ok()) << src.error().message;
    auto r = quantize_gguf(**src, (testing::scratch_dir() / "nan.gguf").string(),
                           {.preset = *find_preset("Q8_0"), .n_threads = 1});
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.error().message.find("blk.0.attn_q.weight"), std::string::npos) << r.error().message;
    EXPECT_NE(r.error().message.find("element 5"), std::string::npos) << r.error().message;
  }
}

TEST(Quantize, ImportanceWeightsOfTheWrongSizeAreRefused) {
  const std::vector<uint8_t> bytes = tiny_model(0.5f);
  auto src = GgufFile::parse(bytes);
  ASSERT_TRUE(src.ok()) << src.error().message;
  const ImportanceMap imatrix = {{"blk.0.attn_q.weight", std::vector<float>(31, 1.0f)}};
  auto r = quantize_gguf(**src, (testing::scratch_dir() / "imatrix.gguf").string(),
                         {.preset = *find_preset("Q4_K_M"), .n_threads = 1, .imatrix = &imatrix});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("31"), std::string::npos) << r.error().message;
}

}  // namespace
}  // namespace kiln::quantize
