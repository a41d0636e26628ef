// GgufWriter: rewriting fixtures round-trips exactly; layout rules; refused inputs.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "gguf_test_util.h"
#include "test_data.h"

namespace kiln {
namespace {

namespace fs = std::filesystem;

std::vector<uint8_t> read_all(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

class RoundTrip : public ::testing::TestWithParam<std::string> {};

TEST_P(RoundTrip, RewriteIsIdentical) {
  const fs::path path = test_data::path(GetParam());
  auto src = GgufFile::open(path.string());
  ASSERT_TRUE(src.ok()) << src.error().message;
  const std::vector<uint8_t> out = gguf_test::rewrite(**src);
  auto back = GgufFile::parse(out);
  ASSERT_TRUE(back.ok()) << back.error().message;
  EXPECT_EQ((*back)->version(), 3u);
  gguf_test::expect_same_content(**src, **back);
  // A second rewrite reproduces the first byte for byte (the writer is deterministic).
  EXPECT_EQ(gguf_test::rewrite(**back), out);
}

// Files with tensors made by llama.cpp's quantizer and by the fixture generator use llama.cpp's
// layout; rewriting them reproduces every byte. (Tensor-less vocab files written by gguf-py lack
// the trailing padding that llama.cpp's writer, and so kiln's, always adds.)
TEST(GgufWriter, RewriteOfLlamaCppFilesIsByteExact) {
  for (const char* name : {"quant/quant-Q4_K_M.gguf", "quant/quant-Q3_K_M.gguf", "quant/quant-IQ4_NL.gguf",
                           "quant/quant-BF16.gguf", "quant/vocab512.gguf"}) {
    SCOPED_TRACE(name);
    const std::vector<uint8_t> original = read_all(test_data::path(name));
    auto src = GgufFile::parse(original);
    ASSERT_TRUE(src.ok()) << src.error().message;
    const std::vector<uint8_t> out = gguf_test::rewrite(**src);
    ASSERT_EQ(out.size(), original.size());
    EXPECT_TRUE(out == original);
  }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, RoundTrip,
                         ::testing::Values("quant/quant-Q4_K_M.gguf", "quant/quant-BF16.gguf",
                                           "quant/vocab512.gguf", "models/llama-spm-e256-Q6_K.gguf",
                                           "vocab/ggml-vocab-llama-spm.gguf"),
                         [](const auto& info) {
                           std::string s = fs::path(info.param).stem().string();
                           for (char& c : s)
                             if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
                           return s;
                         });

// The file sink: a model rewritten to disk reopens with identical content and bytes. The written
// file stays in the build folder; llama.cpp's oracle loads it with the same outputs as the original
// (see the gguf section of the project report for the command).
TEST(GgufWriter, WritesFileThatReopensIdentical) {
  const fs::path src_path = test_data::path("models/qwen3-e64-Q8_0.gguf");
  auto src = GgufFile::open(src_path.string());
  ASSERT_TRUE(src.ok()) << src.error().message;
  const fs::path dir = fs::path(KILN_BINARY_DIR) / "gguf-test";
  fs::create_directories(dir);
  const fs::path out_path = dir / "qwen3-e64-Q8_0.rewritten.gguf";
  GgufWriter w;
  gguf_test::copy_declarations(**src, w);
  Status st = w.begin(out_path.string());
  ASSERT_TRUE(st.ok()) << st.error().message;
  for (const GgufTensorInfo& t : (*src)->tensors()) {
    st = w.write_tensor_data((*src)->tensor_data(t));
    ASSERT_TRUE(st.ok()) << st.error().message;
  }
  st = w.finish();
  ASSERT_TRUE(st.ok()) << st.error().message;
  auto back = GgufFile::open(out_path.string());
  ASSERT_TRUE(back.ok()) << back.error().message;
  gguf_test::expect_same_content(**src, **back);
  EXPECT_TRUE(read_all(out_path) == read_all(src_path));
}

// A layout unlike the original's: general.alignment 128 and the tensors in reverse order. Every
// tensor lands on a 128-byte boundary and keeps its bytes. The file stays in the build folder for
// the llama.cpp oracle check (project report).
TEST(GgufWriter, WritesRealignedReorderedModel) {
  auto src = GgufFile::open(test_data::path("models/qwen3-e64-Q8_0.gguf"));
  ASSERT_TRUE(src.ok()) << src.error().message;
  const GgufFile& g = **src;
  const fs::path dir = fs::path(KILN_BINARY_DIR) / "gguf-test";
  fs::create_directories(dir);
  const fs::path out_path = dir / "qwen3-e64-Q8_0.align128-reversed.gguf";
  GgufWriter w;
  w.copy_metadata(g);
  w.set_u32("general.alignment", 128);
  std::vector<const GgufTensorInfo*> order;
  for (const GgufTensorInfo& t : g.tensors()) order.insert(order.begin(), &t);
  for (const GgufTensorInfo* t : order) {
    ASSERT_TRUE(w.add_tensor(t->name, t->type, std::span<const int64_t>(t->ne.data(), t->n_dims)).ok());
  }
  ASSERT_TRUE(w.begin(out_path.string()).ok());
  for (const GgufTensorInfo* t : order) ASSERT_TRUE(w.write_tensor_data(g.tensor_data(*t)).ok());
  Status st = w.finish();
  ASSERT_TRUE(st.ok()) << st.error().message;

  auto back = GgufFile::open(out_path.string());
  ASSERT_TRUE(back.ok()) << back.error().message;
  EXPECT_EQ((*back)->alignment(), 128u);
  EXPECT_EQ((*back)->data_offset() % 128, 0u);
  EXPECT_EQ(*(*back)->get_u32("general.alignment"), 128u);
  EXPECT_EQ((*back)->metadata().size(), g.metadata().size() + (g.find("general.alignment") ? 0 : 1));
  for (const GgufKv& kv : g.metadata()) {
    const GgufValue* v = (*back)->find(kv.key);
    ASSERT_NE(v, nullptr) << kv.key;
    EXPECT_TRUE(gguf_test::same_value(kv.value, *v)) << kv.key;
  }
  ASSERT_EQ((*back)->tensors().size(), order.size());
  for (size_t i = 0; i < order.size(); ++i) {
    const GgufTensorInfo& t = (*back)->tensors()[i];
    EXPECT_EQ(t.name, order[i]->name);
    EXPECT_EQ(t.offset % 128, 0u) << t.name;
    const auto a = g.tensor_data(*order[i]);
    const auto b = (*back)->tensor_data(t);
    ASSERT_EQ(a.size(), b.size());
    EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size()), 0) << t.name;
  }
}

// The message of a failed Status, or "" when it succeeded.
std::string message_of(const Status& st) { return st.ok() ? std::string() : st.error().message; }

TEST(GgufWriter, SetReplacesInPlace) {
  GgufWriter w;
  w.set_u32("a", 1);
  w.set_string("b", "x");
  w.set_u32("a", 2);
  std::vector<uint8_t> out;
  ASSERT_TRUE(w.begin(out).ok());
  ASSERT_TRUE(w.finish().ok());
  auto g = GgufFile::parse(out);
  ASSERT_TRUE(g.ok()) << g.error().message;
  ASSERT_EQ((*g)->metadata().size(), 2u);
  EXPECT_EQ((*g)->metadata()[0].key, "a");
  EXPECT_EQ(*(*g)->get_u32("a"), 2u);
  EXPECT_EQ(out.size() % 32, 0u);  // padded to the alignment even without tensors, as llama.cpp does
}

TEST(GgufWriter, RefusesWhatLlamaCppCannotRead) {
  auto begin_with = [](auto&& setup) {
    GgufWriter w;
    setup(w);
    std::vector<uint8_t> out;
    return message_of(w.begin(out));
  };
  GgufValue inner;
  inner.type = GgufType::ARRAY;
  inner.elem_type = GgufType::U8;
  GgufValue nested;
  nested.type = GgufType::ARRAY;
  nested.elem_type = GgufType::ARRAY;
  nested.arr.push_back(inner);
  EXPECT_NE(begin_with([&](GgufWriter& w) { w.set("nest", nested); }).find("key 'nest' is a nested array"),
            std::string::npos);
  GgufValue mixed;
  mixed.type = GgufType::ARRAY;
  mixed.elem_type = GgufType::U32;
  mixed.arr.resize(2);
  mixed.arr[0].type = GgufType::U32;
  mixed.arr[1].type = GgufType::STRING;
  EXPECT_NE(
      begin_with([&](GgufWriter& w) { w.set("mixed", mixed); }).find("key 'mixed' element 1 has type string"),
      std::string::npos);
  EXPECT_NE(
      begin_with([](GgufWriter& w) { w.set_u64("general.alignment", 64); }).find("llama.cpp requires u32"),
      std::string::npos);
  EXPECT_NE(begin_with([](GgufWriter& w) {
              w.set_u32("general.alignment", 48);
            }).find("= 48 is not a power of two"),
            std::string::npos);
  EXPECT_NE(begin_with([](GgufWriter& w) { w.set_u32("", 1); }).find("empty key"), std::string::npos);
}

TEST(GgufWriter, RefusesBadTensors) {
  GgufWriter w;
  const int64_t ok_ne[] = {32, 2};
  ASSERT_TRUE(w.add_tensor("t", DType::Q8_0, ok_ne).ok());
  EXPECT_NE(message_of(w.add_tensor("t", DType::F32, ok_ne)).find("duplicate tensor 't'"), std::string::npos);
  EXPECT_NE(message_of(w.add_tensor(std::string(64, 'n'), DType::F32, ok_ne)).find("at most 63"),
            std::string::npos);
  EXPECT_NE(message_of(w.add_tensor("", DType::F32, ok_ne)).find("empty tensor name"), std::string::npos);
  EXPECT_NE(message_of(w.add_tensor("d0", DType::F32, {})).find("0 dimensions"), std::string::npos);
  const int64_t five[] = {1, 1, 1, 1, 1};
  EXPECT_NE(message_of(w.add_tensor("d5", DType::F32, five)).find("5 dimensions"), std::string::npos);
  const int64_t neg[] = {4, -1};
  EXPECT_NE(message_of(w.add_tensor("neg", DType::F32, neg)).find("ne[1] = -1 is negative"),
            std::string::npos);
  const int64_t odd[] = {48};
  EXPECT_NE(
      message_of(w.add_tensor("odd", DType::Q4_K, odd)).find("not a multiple of the block size 256 of q4_K"),
      std::string::npos);
  const int64_t huge[] = {int64_t{1} << 40, int64_t{1} << 40};
  EXPECT_NE(message_of(w.add_tensor("huge", DType::F32, huge)).find("overflows"), std::string::npos);

  std::vector<uint8_t> out;
  ASSERT_TRUE(w.begin(out).ok());
  EXPECT_NE(message_of(w.begin(out)).find("begin called twice"), std::string::npos);
  EXPECT_NE(message_of(w.add_tensor("late", DType::F32, ok_ne)).find("added after begin"), std::string::npos);
  EXPECT_NE(message_of(w.finish()).find("finish after 0 of 1 tensors; next missing: 't'"), std::string::npos);
  std::vector<uint8_t> data(68);  // 2 rows of one Q8_0 block
  EXPECT_NE(
      message_of(w.write_tensor_data(std::span(data).first(67))).find("tensor 't' expects 68 bytes, got 67"),
      std::string::npos);
  ASSERT_TRUE(w.write_tensor_data(data).ok());
  EXPECT_NE(message_of(w.write_tensor_data(data)).find("after all 1 tensors"), std::string::npos);
  ASSERT_TRUE(w.finish().ok());
  EXPECT_NE(message_of(w.finish()).find("finish without begin"), std::string::npos);
  auto g = GgufFile::parse(out);
  ASSERT_TRUE(g.ok()) << g.error().message;
  EXPECT_EQ((*g)->tensors().size(), 1u);
}

TEST(GgufWriter, UnwritablePathIsAnError) {
  GgufWriter w;
  const std::string msg = message_of(w.begin("/nonexistent/kiln-dir/out.gguf"));
  EXPECT_NE(msg.find("cannot create '/nonexistent/kiln-dir/out.gguf'"), std::string::npos) << msg;
}

}  // namespace
}  // namespace kiln
