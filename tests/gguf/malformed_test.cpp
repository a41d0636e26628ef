// Fault tests: every malformed GGUF gives a clean Error naming the problem (never a crash or an
// out-of-bounds read: run under ASan+UBSan in CI), and the cases seed the fuzzer's corpus.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "core/gguf.h"
#include "malformed_cases.h"
#include "test_data.h"

namespace kiln {
namespace {

namespace fs = std::filesystem;
using gguf_test::malformed_cases;
using gguf_test::sample_data_end;
using gguf_test::sample_file;

TEST(GgufMalformed, SampleIsValid) {
  const std::vector<uint8_t> f = sample_file();
  auto g = GgufFile::parse(f);
  ASSERT_TRUE(g.ok()) << g.error().message;
  EXPECT_EQ((*g)->version(), 3u);
  EXPECT_EQ(*(*g)->get_u64("k.u8"), 200u);
  EXPECT_EQ(*(*g)->get_i64("k.i8"), -5);
  EXPECT_EQ(*(*g)->get_u32("k.u16"), 60000u);
  EXPECT_EQ(*(*g)->get_i64("k.i16"), -30000);
  EXPECT_EQ(*(*g)->get_u32("k.u32"), 4000000000u);
  EXPECT_EQ(*(*g)->get_i64("k.i32"), -2000000000);
  EXPECT_EQ(*(*g)->get_f32("k.f32"), 0.25f);
  EXPECT_EQ(*(*g)->get_bool("k.bool"), true);
  EXPECT_EQ(*(*g)->get_u64("k.u64"), uint64_t{1} << 40);
  EXPECT_EQ(*(*g)->get_i64("k.i64"), -(int64_t{1} << 40));
  EXPECT_EQ(*(*g)->get_f32("k.f64"), 3.5f);
  EXPECT_EQ(*(*g)->get_string_array("k.strings"), (std::vector<std::string>{"alpha", "beta", ""}));
  EXPECT_EQ(*(*g)->get_f32_array("k.floats"), (std::vector<float>{1.5f, -2.0f}));
  EXPECT_EQ(*(*g)->get_i64_array("k.ints"), (std::vector<int64_t>{1, -1, 7}));
  // Range checks of the integer getters.
  EXPECT_FALSE((*g)->get_u32("k.u64").ok());
  EXPECT_FALSE((*g)->get_u64("k.i8").ok());
  EXPECT_NE((*g)->get_u64("k.i8").error().message.find("negative"), std::string::npos);
  EXPECT_FALSE((*g)->get_i64("k.f32").ok());
  EXPECT_FALSE((*g)->get_i64_array("k.strings").ok());
  ASSERT_EQ((*g)->tensors().size(), 4u);
  EXPECT_EQ((*g)->find_tensor("tensor_e")->size, 0u);
  EXPECT_TRUE((*g)->tensor_data(*(*g)->find_tensor("tensor_e")).empty());
  EXPECT_EQ((*g)->find_tensor("tensor_b")->size, 72u);
  EXPECT_EQ((*g)->find_tensor("tensor_b")->offset, 64u);
  EXPECT_EQ((*g)->find_tensor("tensor_c")->offset, 160u);
}

TEST(GgufMalformed, EachCaseIsACleanError) {
  const auto cases = malformed_cases();
  EXPECT_GE(cases.size(), 45u);
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    auto g = GgufFile::parse(c.bytes);
    ASSERT_FALSE(g.ok()) << "parsed a malformed file";
    const std::string& msg = g.error().message;
    EXPECT_TRUE(msg.starts_with("gguf: ")) << msg;
    for (const std::string& want : c.expect)
      EXPECT_NE(msg.find(want), std::string::npos) << "'" << want << "' not in: " << msg;
  }
}

// Every prefix of the sample shorter than the end of its last tensor's data is refused; longer
// prefixes only lose padding and stay valid.
TEST(GgufMalformed, TruncationAtEveryByte) {
  const std::vector<uint8_t> f = sample_file();
  const size_t data_end = sample_data_end();
  ASSERT_LT(data_end, f.size());
  for (size_t n = 0; n <= f.size(); ++n) {
    auto g = GgufFile::parse(std::span<const uint8_t>(f.data(), n));
    EXPECT_EQ(g.ok(), n >= data_end) << "prefix of " << n << " bytes"
                                     << (g.ok() ? std::string() : ": " + g.error().message);
  }
}

// Every byte of the header, metadata and tensor infos flipped (three ways): a clean result either
// way (a flipped value byte is often still a valid file), never a crash.
TEST(GgufMalformed, FlippedBytes) {
  const std::vector<uint8_t> f = sample_file();
  auto g = GgufFile::parse(f);
  ASSERT_TRUE(g.ok());
  const size_t meta_end = static_cast<size_t>((*g)->data_offset());
  int refused = 0;
  for (size_t i = 0; i < meta_end; ++i) {
    for (uint8_t mask : {0x01, 0x80, 0xff}) {
      std::vector<uint8_t> m = f;
      m[i] ^= mask;
      auto r = GgufFile::parse(m);
      if (!r.ok()) {
        ++refused;
        EXPECT_TRUE(r.error().message.starts_with("gguf: ")) << r.error().message;
      } else {
        // Whatever parsed must still be internally consistent.
        for (const GgufTensorInfo& t : (*r)->tensors()) EXPECT_EQ((*r)->tensor_data(t).size(), t.size);
      }
    }
  }
  EXPECT_GT(refused, static_cast<int>(meta_end));  // most flips in structure fields are refused
}

TEST(GgufMalformed, NestedArraysWithinTheDepthLimitParse) {
  const std::vector<uint8_t> f = gguf_test::nested_array_file(8);
  auto g = GgufFile::parse(f);
  ASSERT_TRUE(g.ok()) << g.error().message;
  const GgufValue* v = (*g)->find("nested");
  ASSERT_NE(v, nullptr);
  for (int level = 1; level < 8; ++level) {
    ASSERT_EQ(v->type, GgufType::ARRAY);
    ASSERT_EQ(v->elem_type, GgufType::ARRAY);
    ASSERT_EQ(v->arr.size(), 1u);
    v = &v->arr[0];
  }
  ASSERT_EQ(v->elem_type, GgufType::I32);
  ASSERT_EQ(v->arr.size(), 2u);
  EXPECT_EQ(v->arr[1].num.i, -6);
  EXPECT_FALSE((*g)->get_i64_array("nested").ok());
}

TEST(GgufMalformed, OpenNamesThePath) {
  auto missing = GgufFile::open("/nonexistent/kiln/model.gguf");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.error().message, "cannot open '/nonexistent/kiln/model.gguf': No such file or directory");
  auto dir = GgufFile::open(test_data::committed_dir().string());
  ASSERT_FALSE(dir.ok());
  EXPECT_NE(dir.error().message.find("not a regular file"), std::string::npos);

  const fs::path tmp = fs::path(KILN_BINARY_DIR) / "gguf-test";
  fs::create_directories(tmp);
  const fs::path empty = tmp / "empty.gguf";
  std::ofstream(empty).close();
  auto e = GgufFile::open(empty.string());
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.error().message,
            "gguf: '" + empty.string() + "': file too small (0 bytes) to hold the magic 'GGUF'");
  const fs::path bad = tmp / "bad-offset.gguf";
  for (const auto& c : malformed_cases()) {
    if (c.name != "offset-past-end") continue;
    std::ofstream(bad, std::ios::binary).write(reinterpret_cast<const char*>(c.bytes.data()), c.bytes.size());
  }
  auto b = GgufFile::open(bad.string());
  ASSERT_FALSE(b.ok());
  EXPECT_TRUE(b.error().message.starts_with("gguf: '" + bad.string() + "': truncated: the file has "))
      << b.error().message;
  EXPECT_NE(b.error().message.find("tensor 'tensor_c' data ["), std::string::npos) << b.error().message;
}

// Writes the sample, the nested-array file and every malformed case to
// $KILN_BINARY_DIR/fuzz-corpus/gguf, the seed corpus of fuzz/run_fuzz.sh gguf.
TEST(GgufMalformed, WritesFuzzCorpus) {
  const fs::path dir = fs::path(KILN_BINARY_DIR) / "fuzz-corpus" / "gguf";
  fs::create_directories(dir);
  auto write = [&](const std::string& name, const std::vector<uint8_t>& bytes) {
    std::ofstream out(dir / name, std::ios::binary);
    out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
    ASSERT_TRUE(out.good()) << (dir / name);
  };
  write("valid-sample.gguf", sample_file());
  write("valid-nested.gguf", gguf_test::nested_array_file(3));
  size_t n = 2;
  for (const auto& c : malformed_cases()) {
    write("malformed-" + c.name + ".gguf", c.bytes);
    ++n;
  }
  size_t found = 0;
  for (const auto& e : fs::directory_iterator(dir)) found += e.path().extension() == ".gguf";
  EXPECT_GE(found, n);
}

}  // namespace
}  // namespace kiln
