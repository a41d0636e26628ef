// Bit-exactness against llama.cpp's quantizer (quant/ of the test data): for every tensor of every
// quant-T.gguf, quantizing the F32 source tensor reproduces the file's bytes exactly, and
// dequantizing the file's bytes reproduces llama.cpp's first 8 F32 values from quant-T.ref.json.
//
// The ref files' raw_fnv1a64 / f32_fnv1a64 fields are not FNV-1a 64 of the bytes they describe
// (even an F32 tensor's raw hash differs from FNV-1a of its file bytes, which equal the source's),
// so this test compares the bytes themselves, a strictly stronger check of the same property.
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/gguf.h"
#include "ops/quant/quant.h"
#include "test_data.h"

namespace kiln {
namespace {

std::string quant_file(const std::string& name) { return test_data::path("quant/" + name); }

std::unique_ptr<GgufFile> open_gguf(const std::string& path) {
  auto r = GgufFile::open(path);
  EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.error().message);
  return r.ok() ? std::move(r).value() : nullptr;
}

class QuantFixture : public ::testing::TestWithParam<const char*> {};

TEST_P(QuantFixture, QuantizeAndDequantizeMatchLlamaCpp) {
  const std::string stem = GetParam();
  std::ifstream ref_in(quant_file("quant-" + stem + ".ref.json"));
  ASSERT_TRUE(ref_in.good()) << "missing ref for " << stem;
  const nlohmann::json ref = nlohmann::json::parse(ref_in);
  auto qfile = open_gguf(quant_file("quant-" + stem + ".gguf"));
  auto src = open_gguf(quant_file("quant-src-f32.gguf"));
  ASSERT_TRUE(qfile && src);

  int n_quantized = 0;
  for (const auto& t : ref.at("tensors")) {
    const std::string name = t.at("name");
    SCOPED_TRACE(stem + " " + name);
    const GgufTensorInfo* qt = qfile->find_tensor(name);
    const GgufTensorInfo* st = src->find_tensor(name);
    ASSERT_NE(qt, nullptr);
    ASSERT_NE(st, nullptr);
    ASSERT_EQ(st->type, DType::F32);
    ASSERT_EQ(dtype_name(qt->type), t.at("type").get<std::string>());
    const auto qbytes = qfile->tensor_data(*qt);

    // Dequantize the file's bytes.
    const QuantTraits* tr = quant_traits(qt->type);
    ASSERT_NE(tr, nullptr) << dtype_name(qt->type);
    const int64_t n = qt->nelements();
    std::vector<float> deq(static_cast<size_t>(n));
    tr->to_float(qbytes.data(), deq.data(), n);
    const auto& first = t.at("first");
    ASSERT_EQ(first.size(), 8u);
    for (size_t i = 0; i < first.size() && i < deq.size(); ++i) {
      EXPECT_EQ(deq[i], first[i].get<float>()) << "value " << i;
    }

    // Quantize the F32 source to the same type.
    ASSERT_TRUE(quantize_supported(qt->type));
    const auto sbytes = src->tensor_data(*st);
    std::vector<float> x(static_cast<size_t>(n));
    ASSERT_EQ(sbytes.size(), x.size() * sizeof(float));
    std::memcpy(x.data(), sbytes.data(), sbytes.size());
    // Quantization is block-local (no state crosses rows), so rows are checked one by one: every
    // kRowStride-th row and the last, which keeps sanitizer runs short. (All rows of all 14 files
    // matched when this was written.)
    constexpr int64_t kRowStride = 4;
    const int64_t n_per_row = qt->ne[0];
    const int64_t nrows = n / n_per_row;
    const size_t rs = row_size(qt->type, n_per_row);
    ASSERT_EQ(rs * static_cast<size_t>(nrows), qbytes.size());
    std::vector<uint8_t> out(rs);
    std::vector<int64_t> rows;
    for (int64_t r = 0; r < nrows; r += kRowStride) rows.push_back(r);
    if (rows.back() != nrows - 1) rows.push_back(nrows - 1);
    for (int64_t r : rows) {
      ASSERT_EQ(quantize_chunk(qt->type, x.data() + r * n_per_row, out.data(), 1, n_per_row, nullptr), rs);
      ASSERT_EQ(std::memcmp(out.data(), qbytes.data() + r * rs, rs), 0) << "row " << r << " differs";
    }
    ++n_quantized;
  }
  EXPECT_GT(n_quantized, 0);
}

INSTANTIATE_TEST_SUITE_P(AllTypes, QuantFixture,
                         ::testing::Values("F16", "BF16", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0", "Q2_K",
                                           "Q3_K_M", "Q4_K_M", "Q5_K_M", "Q6_K", "IQ4_NL", "IQ4_XS"));

}  // namespace
}  // namespace kiln
