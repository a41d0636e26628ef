// Every GGUF of the test data (and of the extra fixtures folder, when there is one) parses; tensors of the quantizer fixtures match llama.cpp's
// listing in quant-T.ref.json (names, types, shapes, and the first values of F32 tensors).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/gguf.h"
#include "test_data.h"

namespace kiln {
namespace {

namespace fs = std::filesystem;
TEST(GgufFixtures, AllParse) {
  const auto files = test_data::files("", ".gguf", /*with_extra=*/true);
  // 19 vocabularies, 6 models, 14 quantizer files, 2 projectors, vocab512
  ASSERT_GE(files.size(), 42u) << "test data missing under " << test_data::generated_dir();
  for (const fs::path& p : files) {
    SCOPED_TRACE(p.string());
    auto f = GgufFile::open(p.string());
    ASSERT_TRUE(f.ok()) << f.error().message;
    EXPECT_TRUE((*f)->version() == 2 || (*f)->version() == 3);
    EXPECT_EQ((*f)->data_offset() % (*f)->alignment(), 0u);
    // stable-diffusion.cpp's GGUFs (sd/) hold tensors only: no architecture, no tokenizer.
    if (p.parent_path().filename() == "sd") continue;
    auto arch = (*f)->get_string("general.architecture");
    ASSERT_TRUE(arch.ok()) << arch.error().message;
    EXPECT_FALSE(arch->empty());
    // Each tokenizer's token list is parallel to its token-type list (vision projectors, the
    // "clip" architecture of mmproj files, have no tokenizer).
    if (*arch == "clip") {
      EXPECT_FALSE((*f)->get_string_array("tokenizer.ggml.tokens").ok());
    } else {
      auto tokens = (*f)->get_string_array("tokenizer.ggml.tokens");
      ASSERT_TRUE(tokens.ok()) << tokens.error().message;
      EXPECT_GT(tokens->size(), 100u);
      auto types = (*f)->get_i64_array("tokenizer.ggml.token_type");
      ASSERT_TRUE(types.ok()) << types.error().message;
      EXPECT_EQ(types->size(), tokens->size());
    }
    uint64_t end = 0;
    for (const GgufTensorInfo& t : (*f)->tensors()) {
      EXPECT_EQ((*f)->tensor_data(t).size(), t.size) << t.name;
      EXPECT_EQ((*f)->find_tensor(t.name), &t);
      end = std::max(end, (*f)->data_offset() + t.offset + t.size);
    }
    EXPECT_LE(end, (*f)->bytes().size());
  }
}

TEST(GgufFixtures, QuantTensorsMatchLlamaCppListing) {
  int checked_files = 0;
  int checked_f32 = 0;
  for (const fs::path& ref_path : test_data::files("quant", ".ref.json")) {
    SCOPED_TRACE(ref_path.filename().string());
    std::ifstream in(ref_path);
    const auto ref = nlohmann::json::parse(in);
    auto f = GgufFile::open(test_data::path("quant/" + ref["file"].get<std::string>()));
    ASSERT_TRUE(f.ok()) << f.error().message;
    ASSERT_EQ((*f)->tensors().size(), ref["tensors"].size());
    for (const auto& rt : ref["tensors"]) {
      const std::string tname = rt["name"].get<std::string>();
      const GgufTensorInfo* t = (*f)->find_tensor(tname);
      ASSERT_NE(t, nullptr) << tname;
      EXPECT_EQ(dtype_name(t->type), rt["type"].get<std::string>()) << tname;
      const auto ne = rt["ne"].get<std::vector<int64_t>>();
      for (size_t d = 0; d < ne.size(); ++d) EXPECT_EQ(t->ne[d], ne[d]) << tname << " dim " << d;
      EXPECT_EQ((*f)->tensor_data(*t).size(), t->size);
      if (t->type == DType::F32) {
        const auto first = rt["first"].get<std::vector<float>>();
        const float* data = reinterpret_cast<const float*>((*f)->tensor_data(*t).data());
        for (size_t i = 0; i < first.size(); ++i) EXPECT_EQ(data[i], first[i]) << tname << " [" << i << "]";
        ++checked_f32;
      }
    }
    ++checked_files;
  }
  EXPECT_EQ(checked_files, 14);
  EXPECT_GE(checked_f32, 14);
}

TEST(GgufFixtures, TypedGetters) {
  auto f = GgufFile::open(test_data::path("models/qwen3-e64-Q8_0.gguf"));
  ASSERT_TRUE(f.ok()) << f.error().message;
  const GgufFile& g = **f;
  EXPECT_EQ(*g.get_string("general.architecture"), "qwen3");
  auto n_embd = g.get_u32("qwen3.embedding_length");
  ASSERT_TRUE(n_embd.ok()) << n_embd.error().message;
  EXPECT_EQ(*n_embd, 64u);
  EXPECT_EQ(*g.get_i64("qwen3.embedding_length"), 64);
  EXPECT_EQ(*g.get_u64("qwen3.embedding_length"), 64u);
  EXPECT_EQ(*g.get_f32("qwen3.embedding_length"), 64.0f);
  auto missing = g.get_u32("no.such.key");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.error().message.find("'no.such.key' not found"), std::string::npos);
  auto wrong = g.get_u32("general.architecture");
  ASSERT_FALSE(wrong.ok());
  EXPECT_NE(wrong.error().message.find("has type string"), std::string::npos);
  EXPECT_FALSE(g.get_string_array("qwen3.embedding_length").ok());
  EXPECT_FALSE(g.get_bool("general.architecture").ok());
  EXPECT_EQ(g.find("no.such.key"), nullptr);
  EXPECT_EQ(g.find_tensor("no.such.tensor"), nullptr);
  const GgufTensorInfo* emb = g.find_tensor("token_embd.weight");
  ASSERT_NE(emb, nullptr);
  EXPECT_EQ(emb->ne[0], 64);
  const TensorView v = g.tensor_view(*emb);
  EXPECT_TRUE(v.is_contiguous());
  EXPECT_EQ(v.span_bytes(), emb->size);
  EXPECT_EQ(static_cast<const uint8_t*>(v.data), g.tensor_data(*emb).data());
}

}  // namespace
}  // namespace kiln
