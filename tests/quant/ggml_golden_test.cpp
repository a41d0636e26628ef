// Kernels that reproduce the float order of llama.cpp's reference build (its AVX-512 CPU backend)
// against outputs of that build's own functions (data/ggml_avx512_golden.json, written by
// data/gen_ggml_avx512_golden.cpp): results must be bit-identical.
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/half.h"
#include "ops/quant/kernels.h"
#include "ops/quant/quant.h"
#include "ops/quant/simd_math.h"

namespace kiln {
namespace {

nlohmann::json golden() {
  std::ifstream in(std::string(KILN_SOURCE_DIR) + "/tests/quant/data/ggml_avx512_golden.json");
  EXPECT_TRUE(in.good());
  return nlohmann::json::parse(in);
}

std::vector<uint8_t> unhex(const std::string& s) {
  std::vector<uint8_t> out(s.size() / 2);
  for (size_t i = 0; i < out.size(); ++i) out[i] = static_cast<uint8_t>(std::stoul(s.substr(2 * i, 2), nullptr, 16));
  return out;
}

float from_bits(const std::string& s) {
  const uint32_t u = static_cast<uint32_t>(std::stoul(s, nullptr, 16));
  float f;
  std::memcpy(&f, &u, sizeof(f));
  return f;
}

uint32_t bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof(u));
  return u;
}

TEST(GgmlGolden, ExpMatchesGgmlVExpf) {
  const auto g = golden();
  ASSERT_EQ(g["expf"].size(), 128u);
  for (const auto& pair : g["expf"]) {
    const float x = from_bits(pair[0].get<std::string>());
    EXPECT_EQ(bits(quant::expf_ggml_avx512(x)), bits(from_bits(pair[1].get<std::string>()))) << "x = " << x;
  }
}

TEST(GgmlGolden, DotProductsAreBitExact) {
  if (!quant::cpu_has_avx2()) GTEST_SKIP() << "the emulations are bound on AVX2 CPUs only";
  const auto g = golden();
  int checked = 0;
  for (const auto& c : g["dots"]) {
    const std::string kind = c["kind"].get<std::string>();
    const int64_t n = c["n"].get<int64_t>();
    const auto w = unhex(c["w"].get<std::string>());
    const auto a = unhex(c["a"].get<std::string>());
    const uint32_t want = bits(from_bits(c["out"].get<std::string>()));
    SCOPED_TRACE(kind + " n=" + std::to_string(n));
    std::vector<float> got;
    auto run = [&](VecDotFn f) {
      ASSERT_NE(f, nullptr);
      float s = 0;
      f(n, &s, w.data(), a.data());
      got.push_back(s);
    };
    if (kind == "f32") {
      run(quant_traits(DType::F32)->vec_dot);
    } else if (kind == "f16") {
      run(quant_traits(DType::F16)->vec_dot);
    } else if (kind == "q6_K") {
      run(quant_traits(DType::Q6_K)->vec_dot);
    } else {
      const QuantTraits* t = quant_traits(kind.rfind("q4_0", 0) == 0 ? DType::Q4_0 : DType::Q4_K);
      const bool gemm = kind.find("gemm") != std::string::npos;
      run(gemm ? t->vec_dot_rows8_x4 : t->vec_dot_rows8);
      run(gemm ? t->vec_dot_rows8_x4_ref : t->vec_dot_rows8_ref);
    }
    for (float s : got) EXPECT_EQ(bits(s), want) << s << " vs " << from_bits(c["out"].get<std::string>());
    ++checked;
  }
  EXPECT_EQ(checked, 38);
}

}  // namespace
}  // namespace kiln
