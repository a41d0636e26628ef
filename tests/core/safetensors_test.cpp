// Safetensors reader: a valid file and sharded checkpoint parse; every malformed header, range,
// overlap, dtype and name is an Error naming the tensor and the numbers.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "core/safetensors.h"

namespace kiln {
namespace {

// A file: 8-byte little-endian header length, the header text, then `data_bytes` bytes 0,1,2,...
std::vector<uint8_t> make_file(const std::string& header, size_t data_bytes) {
  std::vector<uint8_t> out;
  const uint64_t n = header.size();
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<uint8_t>(n >> (8 * i)));
  out.insert(out.end(), header.begin(), header.end());
  for (size_t i = 0; i < data_bytes; ++i) out.push_back(static_cast<uint8_t>(i));
  return out;
}

std::string error_of(const std::vector<uint8_t>& bytes) {
  auto r = SafetensorsFile::parse(bytes, "t.safetensors");
  return r.ok() ? std::string("<ok>") : r.error().message;
}

const char* kValid =
    R"({"__metadata__":{"format":"pt"},"b":{"dtype":"F16","shape":[3],"data_offsets":[8,14]},)"
    R"("a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";

TEST(Safetensors, ParsesAValidFile) {
  auto bytes = make_file(kValid, 14);
  auto r = SafetensorsFile::parse(bytes, "t.safetensors");
  ASSERT_TRUE(r.ok()) << r.error().message;
  const auto& f = **r;
  ASSERT_EQ(f.tensors().size(), 2u);
  EXPECT_EQ(f.metadata().at("format"), "pt");
  const SafetensorsTensor* a = f.find("a");
  const SafetensorsTensor* b = f.find("b");
  ASSERT_TRUE(a && b);
  EXPECT_EQ(a->dtype, "F32");
  EXPECT_EQ(a->shape, std::vector<int64_t>{2});
  EXPECT_EQ(a->data.size(), 8u);
  EXPECT_EQ(a->data.data(), bytes.data() + 8 + std::strlen(kValid));
  EXPECT_EQ(b->data.size(), 6u);
  EXPECT_EQ(b->data[0], 8);  // data byte 8 holds the value 8
  EXPECT_EQ(f.find("c"), nullptr);
}

TEST(Safetensors, ConvertsHalfAndBf16ToF32) {
  // F16 1.0 = 0x3c00, BF16 -2.0 = 0xc000, little-endian
  const std::string h = R"({"h":{"dtype":"F16","shape":[1],"data_offsets":[0,2]},"b":{"dtype":"BF16","shape":[1],"data_offsets":[2,4]}})";
  auto bytes = make_file(h, 4);
  const size_t base = 8 + h.size();
  bytes[base] = 0x00; bytes[base + 1] = 0x3c; bytes[base + 2] = 0x00; bytes[base + 3] = 0xc0;
  auto r = SafetensorsFile::parse(bytes, "t");
  ASSERT_TRUE(r.ok()) << r.error().message;
  auto hv = tensor_to_f32(*(*r)->find("h"));
  auto bv = tensor_to_f32(*(*r)->find("b"));
  ASSERT_TRUE(hv.ok() && bv.ok());
  EXPECT_EQ((*hv)[0], 1.0f);
  EXPECT_EQ((*bv)[0], -2.0f);
}

TEST(Safetensors, RefusesTruncatedFiles) {
  auto bytes = make_file(kValid, 14);
  EXPECT_NE(error_of({bytes.begin(), bytes.begin() + 5}).find("shorter than the 8-byte header length"), std::string::npos);
  // Every truncation is an error, never a crash.
  for (size_t n = 0; n < bytes.size(); ++n) {
    EXPECT_FALSE(SafetensorsFile::parse(std::span(bytes.data(), n), "t").ok()) << "length " << n;
  }
  // Data cut short: the last tensor's range runs past the buffer.
  auto shorter = make_file(kValid, 13);
  EXPECT_NE(error_of(shorter).find("tensor 'b': data [8, 14) past the end of the data buffer (size 13)"), std::string::npos)
      << error_of(shorter);
}

TEST(Safetensors, RefusesBadHeaderLength) {
  auto bytes = make_file(kValid, 14);
  bytes[0] = 0xff; bytes[1] = 0xff;  // header length far past the file
  EXPECT_NE(error_of(bytes).find("runs past the end of the file"), std::string::npos) << error_of(bytes);
  std::vector<uint8_t> huge(8, 0);
  huge[4] = 1;  // 2^32 > 100 MB limit
  EXPECT_NE(error_of(huge).find("exceeds the limit"), std::string::npos) << error_of(huge);
}

TEST(Safetensors, RefusesBadJson) {
  EXPECT_NE(error_of(make_file(R"({"a":{"dtype":"F32",)", 0)).find("invalid JSON"), std::string::npos);
  EXPECT_NE(error_of(make_file("[1,2]", 0)).find("does not start with '{'"), std::string::npos);
  EXPECT_NE(error_of(make_file(R"({"a":5})", 0)).find("tensor 'a': entry is not an object"), std::string::npos);
  EXPECT_NE(error_of(make_file(R"({"a":{"shape":[1],"data_offsets":[0,4]}})", 4)).find("tensor 'a': missing or non-string 'dtype'"),
            std::string::npos);
  EXPECT_NE(error_of(make_file(R"({"a":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}})", 4)).find("shape entry -1"),
            std::string::npos);
  EXPECT_NE(error_of(make_file(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0]}})", 4)).find("'data_offsets' is not an array of 2"),
            std::string::npos);
  EXPECT_NE(error_of(make_file(R"({"__metadata__":{"k":1}})", 0)).find("__metadata__ value of 'k' is not a string"),
            std::string::npos);
}

TEST(Safetensors, RefusesBadDtype) {
  auto e = error_of(make_file(R"({"w":{"dtype":"F12","shape":[1],"data_offsets":[0,4]}})", 4));
  EXPECT_NE(e.find("tensor 'w': unknown dtype 'F12'"), std::string::npos) << e;
  // A known dtype that does not convert parses, and tensor_to_f32 names it.
  auto bytes = make_file(R"({"i":{"dtype":"I64","shape":[1],"data_offsets":[0,8]}})", 8);
  auto r = SafetensorsFile::parse(bytes, "t");
  ASSERT_TRUE(r.ok()) << r.error().message;
  auto f = tensor_to_f32(*(*r)->find("i"));
  ASSERT_FALSE(f.ok());
  EXPECT_NE(f.error().message.find("tensor 'i' has dtype I64"), std::string::npos);
}

TEST(Safetensors, RefusesBadOffsets) {
  auto e = error_of(make_file(R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[8,0]}})", 8));
  EXPECT_NE(e.find("tensor 'w': data_offsets [8, 0) are reversed"), std::string::npos) << e;
  e = error_of(make_file(R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,12]}})", 12));
  EXPECT_NE(e.find("tensor 'w': data_offsets [0, 12) hold 12 bytes but F32 shape [2] needs 8"), std::string::npos) << e;
  e = error_of(make_file(R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", 100));
  EXPECT_NE(e.find("tensors cover 8 bytes of the data buffer but it holds 100"), std::string::npos) << e;
  e = error_of(make_file(R"({"w":{"dtype":"F32","shape":[4611686018427387904,4],"data_offsets":[0,8]}})", 8));
  EXPECT_NE(e.find("tensor 'w': shape [4611686018427387904,4] overflows"), std::string::npos) << e;
  e = error_of(make_file(R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[0,18446744073709551615]}})", 8));
  EXPECT_NE(e.find("past the end of the data buffer (size 8)"), std::string::npos) << e;
}

TEST(Safetensors, RefusesOverlapAndGaps) {
  auto e = error_of(make_file(
      R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})", 12));
  EXPECT_NE(e.find("tensor 'b' data [4, 12) overlaps tensor 'a' data [0, 8)"), std::string::npos) << e;
  e = error_of(make_file(
      R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"b":{"dtype":"F32","shape":[1],"data_offsets":[8,12]}})", 12));
  EXPECT_NE(e.find("gap of 4 bytes in the data buffer before tensor 'b' at 8"), std::string::npos) << e;
}

TEST(Safetensors, RefusesDuplicateNames) {
  auto e = error_of(make_file(
      R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})", 8));
  EXPECT_NE(e.find("duplicate name 'a'"), std::string::npos) << e;
}

// Sharded checkpoints: the index's weight_map must match the shards exactly.
class ShardedCheckpoint : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::path(KILN_BINARY_DIR) / "convert_test_shards" /
           ::testing::UnitTest::GetInstance()->current_test_info()->name();
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
    write("model-00001-of-00002.safetensors", make_file(R"({"x":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})", 4));
    write("model-00002-of-00002.safetensors", make_file(R"({"y":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", 8));
  }
  void write(const std::string& name, const std::vector<uint8_t>& bytes) {
    std::ofstream(dir_ / name, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()), bytes.size());
  }
  void write_index(const std::string& weight_map) {
    const std::string text = R"({"metadata":{},"weight_map":)" + weight_map + "}";
    write("model.safetensors.index.json", std::vector<uint8_t>(text.begin(), text.end()));
  }
  std::string error() {
    auto r = SafetensorsCheckpoint::open(dir_.string());
    return r.ok() ? std::string("<ok>") : r.error().message;
  }
  std::filesystem::path dir_;
};

TEST_F(ShardedCheckpoint, OpensBothShards) {
  write_index(R"({"x":"model-00001-of-00002.safetensors","y":"model-00002-of-00002.safetensors"})");
  auto r = SafetensorsCheckpoint::open(dir_.string());
  ASSERT_TRUE(r.ok()) << r.error().message;
  ASSERT_EQ(r->tensors().size(), 2u);
  EXPECT_EQ(r->tensors()[0]->name, "x");
  EXPECT_EQ(r->find("y")->shape, std::vector<int64_t>{2});
}

TEST_F(ShardedCheckpoint, RefusesAMismatchedIndex) {
  write_index(R"({"x":"model-00002-of-00002.safetensors","y":"model-00002-of-00002.safetensors"})");
  EXPECT_NE(error().find("tensor 'x' listed for shard 'model-00002-of-00002.safetensors' is missing"), std::string::npos)
      << error();
  write_index(R"({"x":"model-00001-of-00002.safetensors","y":"model-00001-of-00002.safetensors"})");
  EXPECT_NE(error().find("'y' listed for shard 'model-00001-of-00002.safetensors' is missing"), std::string::npos) << error();
  write_index(R"({"x":"model-00001-of-00002.safetensors","y":"model-00002-of-00002.safetensors","z":"model-00003.safetensors"})");
  EXPECT_NE(error().find("model-00003.safetensors"), std::string::npos) << error();
  write_index(R"({"x":"../evil.safetensors"})");
  EXPECT_NE(error().find("outside the folder"), std::string::npos) << error();
  write("model-00001-of-00002.safetensors",
        make_file(R"({"x":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"q":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})", 8));
  write_index(R"({"x":"model-00001-of-00002.safetensors","y":"model-00002-of-00002.safetensors"})");
  EXPECT_NE(error().find("tensor 'q' is in shard 'model-00001-of-00002.safetensors' but not in the weight_map"),
            std::string::npos)
      << error();
}

}  // namespace
}  // namespace kiln
