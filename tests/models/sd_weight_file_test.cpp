// SdWeightFile: a safetensors file becomes a GGUF view with the same names, sizes innermost first
// and the same bytes; a GGUF is used as is; pickles, unknown and damaged files are Errors that say
// what is wrong.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "core/half.h"
#include "models/sd/weight_file.h"

namespace kiln::sd {
namespace {

// A safetensors file: header length, header, then `data`.
std::vector<uint8_t> safetensors(const std::string& header, const std::vector<uint8_t>& data) {
  std::vector<uint8_t> out;
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<uint8_t>(header.size() >> (8 * i)));
  out.insert(out.end(), header.begin(), header.end());
  out.insert(out.end(), data.begin(), data.end());
  return out;
}

// resize and memcpy, not insert of a small array: GCC 12's false -Wstringop-overflow.
template <class T>
void append(std::vector<uint8_t>& out, T v) {
  const size_t at = out.size();
  out.resize(at + sizeof(T));
  std::memcpy(out.data() + at, &v, sizeof(T));
}

TEST(SdWeightFile, SafetensorsBecomesGgufWithReversedSizes) {
  // w: F32 [2, 3] (PyTorch order) = 0..5; h: F16 [2]; ids: I64 [1, 2], left out.
  std::vector<uint8_t> data;
  for (int i = 0; i < 6; ++i) append(data, static_cast<float>(i));
  append(data, f32_to_f16(1.5f));
  append(data, f32_to_f16(-2.0f));
  append(data, int64_t{7});
  append(data, int64_t{8});
  const std::string header =
      R"({"w":{"dtype":"F32","shape":[2,3],"data_offsets":[0,24]},)"
      R"("h":{"dtype":"F16","shape":[2],"data_offsets":[24,28]},)"
      R"("model.ids":{"dtype":"I64","shape":[1,2],"data_offsets":[28,44]}})";
  const auto bytes = safetensors(header, data);
  auto r = SdWeightFile::parse(bytes, "t.safetensors");
  ASSERT_TRUE(r.ok()) << r.error().message;
  const GgufFile& g = (*r)->gguf();
  EXPECT_EQ((*r)->format(), WeightFormat::Safetensors);
  ASSERT_EQ(g.tensors().size(), 2u);
  const GgufTensorInfo* w = g.find_tensor("w");
  ASSERT_NE(w, nullptr);
  EXPECT_EQ(w->type, DType::F32);
  EXPECT_EQ(w->ne[0], 3);
  EXPECT_EQ(w->ne[1], 2);
  const auto wd = g.tensor_data(*w);
  ASSERT_EQ(wd.size(), 24u);
  EXPECT_EQ(std::memcmp(wd.data(), data.data(), 24), 0);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(wd.data()) % 16, 0u);  // aligned for the kernels
  const GgufTensorInfo* h = g.find_tensor("h");
  ASSERT_NE(h, nullptr);
  EXPECT_EQ(h->type, DType::F16);
  EXPECT_EQ(h->ne[0], 2);
  EXPECT_EQ(g.find_tensor("model.ids"), nullptr);
}

TEST(SdWeightFile, GgufIsUsedAsIs) {
  GgufWriter w;
  const std::vector<int64_t> ne{4};
  ASSERT_TRUE(w.add_tensor("x", DType::F32, ne).ok());
  std::vector<uint8_t> bytes;
  ASSERT_TRUE(w.begin(bytes).ok());
  std::vector<uint8_t> x(16, 1);
  ASSERT_TRUE(w.write_tensor_data(x).ok());
  ASSERT_TRUE(w.finish().ok());
  auto r = SdWeightFile::parse(bytes, "t.gguf");
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ((*r)->format(), WeightFormat::Gguf);
  EXPECT_NE((*r)->gguf().find_tensor("x"), nullptr);
}

std::string error_of(const std::vector<uint8_t>& bytes, const std::string& label = "m") {
  auto r = SdWeightFile::parse(bytes, label);
  return r.ok() ? std::string("(no error)") : r.error().message;
}

TEST(SdWeightFile, PicklesAreRefusedWithTheReason) {
  const std::vector<uint8_t> zip{'P', 'K', 3, 4, 0, 0, 0, 0, 0, 0};
  const std::vector<uint8_t> pickle{0x80, 2, '}', 'q', 0, 0, 0, 0, 0, 0};
  for (const auto& bytes : {zip, pickle}) {
    const std::string e = error_of(bytes, "v1-5.ckpt");
    EXPECT_NE(e.find("'v1-5.ckpt' is a PyTorch pickle checkpoint"), std::string::npos) << e;
    EXPECT_NE(e.find("Convert it to .safetensors"), std::string::npos) << e;
  }
}

TEST(SdWeightFile, DamagedAndUnknownFilesAreErrors) {
  EXPECT_NE(error_of({}).find("neither GGUF nor safetensors"), std::string::npos);
  EXPECT_NE(error_of({'h', 'e', 'l', 'l', 'o', 0, 0, 0, 0, 0}).find("starts with 68 65 6c 6c 6f"), std::string::npos);
  // A header whose offsets claim more bytes than the file holds (a truncated file).
  const std::string header = R"({"w":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})";
  std::vector<uint8_t> short_data(8, 0);
  const std::string e = error_of(safetensors(header, short_data), "cut.safetensors");
  EXPECT_NE(e.find("tensor 'w'"), std::string::npos) << e;
  // A header that lies about a size: 4 F32 values in 12 bytes.
  const std::string lie = R"({"w":{"dtype":"F32","shape":[4],"data_offsets":[0,12]}})";
  EXPECT_NE(error_of(safetensors(lie, std::vector<uint8_t>(12, 0))).find("needs 16"), std::string::npos);
  // More dimensions than a graph tensor has.
  const std::string five = R"({"w":{"dtype":"F32","shape":[1,1,1,1,2],"data_offsets":[0,8]}})";
  EXPECT_NE(error_of(safetensors(five, std::vector<uint8_t>(8, 0))).find("5 dimensions"), std::string::npos);
  // A truncated GGUF.
  EXPECT_NE(error_of({'G', 'G', 'U', 'F', 3, 0}).find("gguf"), std::string::npos);
}

}  // namespace
}  // namespace kiln::sd
