// kiln quantize's Stable Diffusion rules (quantize/sd_policy.h, quantize_sd): which tensors
// stable-diffusion.cpp's `convert` turns into the chosen type, by name and row length, and the file
// quantize_sd writes from them: the source's order and names, no metadata, converted tensors equal to
// one quantize_chunk of the source, the others copied.
#include <gtest/gtest.h>

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "core/gguf.h"
#include "ops/quant/quant.h"
#include "quantize/quantize.h"
#include "quantize/sd_policy.h"
#include "test_support.h"

namespace kiln::quantize {
namespace {

using Ne = std::array<int64_t, kMaxDims>;

TEST(SdPolicy, ConvertsLinearWeightsAndGainsNotConvsBiasesOrEmbeddings) {
  const std::string u = "model.diffusion_model.";
  const std::string c = "cond_stage_model.transformer.text_model.";
  const struct {
    std::string name;
    Ne ne;
    DType type;
    bool converted;
  } cases[] = {
      {u + "input_blocks.1.1.transformer_blocks.0.attn1.to_q.weight", {320, 320, 1, 1}, DType::Q8_0, true},
      {u + "input_blocks.1.0.in_layers.0.weight", {320, 1, 1, 1}, DType::Q8_0, true},   // a GroupNorm's gain
      {u + "input_blocks.1.0.in_layers.0.weight", {320, 1, 1, 1}, DType::Q4_K, false},  // 320 % 256
      {u + "input_blocks.0.0.weight", {3, 3, 4, 320}, DType::Q8_0, false},              // a conv kernel
      {u + "input_blocks.0.0.weight", {3, 3, 4, 320}, DType::F16, true},                // F16 takes any row
      {u + "input_blocks.1.1.proj_in.weight", {1, 1, 320, 320}, DType::Q4_0, false},    // a 1x1 conv
      {u + "input_blocks.1.1.transformer_blocks.0.attn1.to_out.0.bias", {320, 1, 1, 1}, DType::Q8_0, false},
      {u + "time_embed.0.weight", {320, 1280, 1, 1}, DType::Q8_0, false},
      {c + "embeddings.token_embedding.weight", {768, 49408, 1, 1}, DType::Q8_0, false},
      {c + "embeddings.position_embedding.weight", {768, 77, 1, 1}, DType::F16, false},
      {c + "encoder.layers.0.mlp.fc1.weight", {768, 3072, 1, 1}, DType::Q4_K, true},
      {c + "encoder.layers.0.layer_norm1.weight", {768, 1, 1, 1}, DType::Q5_K, true},
  };
  for (const auto& k : cases)
    EXPECT_EQ(sd_converts_tensor(k.name, k.ne, k.type), k.converted)
        << k.name << " to " << dtype_name(k.type);
}

TEST(SdPolicy, TypeNamesAreSdCliTypes) {
  EXPECT_EQ(sd_type_from_name("q8_0"), DType::Q8_0);
  EXPECT_EQ(sd_type_from_name("Q4_K"), DType::Q4_K);
  EXPECT_EQ(sd_type_from_name("f16"), DType::F16);
  EXPECT_EQ(sd_type_from_name("Q4_K_M"), std::nullopt);  // a llama.cpp preset, not a type
  EXPECT_EQ(sd_type_from_name("IQ4_NL"), std::nullopt);
}

// A tiny SD-named file: a linear weight, its bias, a 3x3 conv kernel and a norm gain, F32.
std::vector<uint8_t> tiny_sd_file() {
  GgufWriter w;
  const struct {
    const char* name;
    std::vector<int64_t> ne;
  } tensors[] = {{"model.diffusion_model.out.2.weight", {3, 3, 64, 4}},
                 {"model.diffusion_model.emb_layers.1.weight", {64, 8}},
                 {"model.diffusion_model.emb_layers.1.bias", {8}},
                 {"model.diffusion_model.out.0.weight", {64}}};
  std::vector<std::vector<float>> data;
  for (const auto& t : tensors) {
    EXPECT_TRUE(w.add_tensor(t.name, DType::F32, t.ne).ok());
    int64_t n = 1;
    for (int64_t d : t.ne) n *= d;
    std::vector<float> v(static_cast<size_t>(n));
    for (size_t i = 0; i < v.size(); ++i)
      v[i] = static_cast<float>((i * 37 + data.size() * 11) % 101) / 50.0f - 1.0f;
    data.push_back(std::move(v));
  }
  std::vector<uint8_t> bytes;
  EXPECT_TRUE(w.begin(bytes).ok());
  for (const auto& v : data)
    EXPECT_TRUE(w.write_tensor_data({reinterpret_cast<const uint8_t*>(v.data()), v.size() * 4}).ok());
  EXPECT_TRUE(w.finish().ok());
  return bytes;
}

// For Q8_0 and Q4_0: the converted tensors equal quantize_chunk with importance weights of 1 (as
// stable-diffusion.cpp quantizes: for Q4_0 the weighted search, which differs from the plain one).
TEST(SdQuantize, WritesStableDiffusionCppsTypesInTheSourceOrder) {
  const std::vector<uint8_t> bytes = tiny_sd_file();
  auto src = GgufFile::parse(bytes);
  ASSERT_TRUE(src.ok()) << src.error().message;
  for (DType type : {DType::Q8_0, DType::Q4_0}) {
    const std::string out_path =
        (testing::scratch_dir() / ("sd-" + std::string(dtype_name(type)) + ".gguf")).string();
    auto summary = quantize_sd(**src, out_path, type, {.preset = {}, .n_threads = 1});
    ASSERT_TRUE(summary.ok()) << summary.error().message;
    EXPECT_EQ(summary->n_converted, 2u);
    auto out = GgufFile::open(out_path);
    ASSERT_TRUE(out.ok()) << out.error().message;
    EXPECT_TRUE((*out)->metadata().empty());
    ASSERT_EQ((*out)->tensors().size(), 4u);
    const DType want[] = {DType::F32, type, DType::F32, type};
    size_t weighted_differs = 0;
    for (size_t i = 0; i < 4; ++i) {
      const GgufTensorInfo& s = (*src)->tensors()[i];
      const GgufTensorInfo& t = (*out)->tensors()[i];
      EXPECT_EQ(t.name, s.name);
      EXPECT_EQ(t.ne, s.ne) << t.name;
      EXPECT_EQ(t.type, want[i]) << t.name;
      const auto in = (*src)->tensor_data(s);
      const auto got = (*out)->tensor_data(t);
      if (t.type == s.type) {
        EXPECT_TRUE(std::equal(got.begin(), got.end(), in.begin(), in.end())) << t.name;
        continue;
      }
      const int64_t rows = s.nelements() / s.ne[0];
      const std::vector<float> ones(static_cast<size_t>(s.ne[0]), 1.0f);
      std::vector<uint8_t> q(row_size(t.type, s.ne[0]) * static_cast<size_t>(rows)), plain(q.size());
      const auto* values = reinterpret_cast<const float*>(in.data());
      quantize_chunk(t.type, values, q.data(), rows, s.ne[0], ones.data());
      quantize_chunk(t.type, values, plain.data(), rows, s.ne[0], nullptr);
      EXPECT_TRUE(std::equal(got.begin(), got.end(), q.begin(), q.end())) << t.name;
      weighted_differs += q != plain;
    }
    if (type == DType::Q4_0) {
      EXPECT_GT(weighted_differs, 0u);  // the check above tells the two apart
    }
  }
}

}  // namespace
}  // namespace kiln::quantize
