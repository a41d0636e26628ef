// Kernels that reproduce the float order of llama.cpp's reference build (its AVX-512 CPU backend)
// against outputs of that build's own functions (data/ggml_avx512_golden.json, written by
// data/gen_ggml_avx512_golden.cpp): results must be bit-identical. IQ4_XS has its own file
// (data/ggml_iq4_xs_golden.json, written by data/gen_ggml_iq4_xs_golden.cpp): llama.cpp's quantizer,
// dequantizer and vec_dot, whose AVX2 code the AVX-512 build runs too.
#include <gtest/gtest.h>

#include <cmath>
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

nlohmann::json golden(const char* file = "ggml_avx512_golden.json") {
  std::ifstream in(std::string(KILN_SOURCE_DIR) + "/tests/quant/data/" + file);
  EXPECT_TRUE(in.good());
  return nlohmann::json::parse(in);
}

std::vector<uint8_t> unhex(const std::string& s) {
  std::vector<uint8_t> out(s.size() / 2);
  for (size_t i = 0; i < out.size(); ++i)
    out[i] = static_cast<uint8_t>(std::stoul(s.substr(2 * i, 2), nullptr, 16));
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
      const QuantTraits* t = quant_traits(DType::Q6_K);
      run(t->vec_dot);
    } else {
      const QuantTraits* t = quant_traits(kind.rfind("q4_0", 0) == 0 ? DType::Q4_0 : DType::Q4_K);
      const bool gemm = kind.find("gemm") != std::string::npos;
      run(gemm ? t->vec_dot_rows8_x4 : t->vec_dot_rows8);
      run(gemm ? t->vec_dot_rows8_x4_ref : t->vec_dot_rows8_ref);
      if (gemm && t->vec_dot_rows8_x4_8x4 != nullptr) {
        // The same weight row eight times and activation row four times, padded apart.
        const size_t w_stride = w.size() + 6, a_stride = a.size() + 8;
        std::vector<uint8_t> w8(8 * w_stride, 0xCD), a4(4 * a_stride, 0xAB);
        for (int i = 0; i < 8; ++i) std::memcpy(w8.data() + i * w_stride, w.data(), w.size());
        for (int r = 0; r < 4; ++r) std::memcpy(a4.data() + r * a_stride, a.data(), a.size());
        float out[4][10] = {};
        t->vec_dot_rows8_x4_8x4(n, &out[0][0], sizeof(out[0]), w8.data(), w_stride, a4.data(), a_stride);
        for (int r = 0; r < 4; ++r)
          for (int i = 0; i < 8; ++i) got.push_back(out[r][i]);
      }
    }
    for (float s : got) EXPECT_EQ(bits(s), want) << s << " vs " << from_bits(c["out"].get<std::string>());
    ++checked;
  }
  EXPECT_EQ(checked, 38);
}

// quantize_iq4_xs with and without importance weights, quantize_row_iq4_xs_ref (the from_float)
// and dequantize_row_iq4_xs reproduce llama.cpp's bytes and values, including an all-zero
// super-block (scale -0.0), a zero sub-block, values near GROUP_MAX_EPS and a constant row.
TEST(GgmlGolden, IQ4XSQuantizeAndDequantizeAreBitExact) {
  const auto g = golden("ggml_iq4_xs_golden.json");
  const QuantTraits* t = quant_traits(DType::IQ4_XS);
  ASSERT_NE(t, nullptr);
  int checked = 0;
  for (const auto& c : g["quantize"]) {
    const int64_t n = c["n"].get<int64_t>();
    SCOPED_TRACE("case " + std::to_string(checked) + " n=" + std::to_string(n));
    const auto xb = unhex(c["x"].get<std::string>()), qwb = unhex(c["qw"].get<std::string>());
    std::vector<float> x(n), qw(n);
    std::memcpy(x.data(), xb.data(), xb.size());
    std::memcpy(qw.data(), qwb.data(), qwb.size());
    std::vector<uint8_t> out(row_size(DType::IQ4_XS, n));
    ASSERT_EQ(quantize_chunk(DType::IQ4_XS, x.data(), out.data(), 1, n, nullptr), out.size());
    EXPECT_EQ(out, unhex(c["q"].get<std::string>())) << "without importance weights";
    quantize_chunk(DType::IQ4_XS, x.data(), out.data(), 1, n, qw.data());
    const auto q_imatrix = unhex(c["q_imatrix"].get<std::string>());
    EXPECT_EQ(out, q_imatrix) << "with importance weights";
    t->from_float(x.data(), out.data(), n);
    EXPECT_EQ(out, unhex(c["q_ref"].get<std::string>())) << "quantize_row_iq4_xs_ref";
    std::vector<float> y(n);
    t->to_float(q_imatrix.data(), y.data(), n);
    const auto want = unhex(c["deq_imatrix"].get<std::string>());
    EXPECT_EQ(std::memcmp(y.data(), want.data(), want.size()), 0) << "dequantize_row_iq4_xs";
    ++checked;
  }
  EXPECT_EQ(checked, 8);
}

// The AVX2 vec_dot against ggml_vec_dot_iq4_xs_q8_K bit for bit; the scalar reference (ggml's
// generic order) to float rounding.
TEST(GgmlGolden, IQ4XSDotIsBitExact) {
  const auto g = golden("ggml_iq4_xs_golden.json");
  int checked = 0;
  for (const auto& c : g["dots"]) {
    const int64_t n = c["n"].get<int64_t>();
    SCOPED_TRACE("n=" + std::to_string(n));
    const auto w = unhex(c["w"].get<std::string>()), a = unhex(c["a"].get<std::string>());
    const float want = from_bits(c["out"].get<std::string>());
    const auto* wb = reinterpret_cast<const quant::BlockIQ4XS*>(w.data());
    const auto* ab = reinterpret_cast<const quant::BlockQ8_K*>(a.data());
    float ref = 0;
    quant::vec_dot_iq4_xs_q8_K(n, &ref, wb, ab);
    EXPECT_NEAR(ref, want, 1e-5f * std::fabs(want) + 1e-6f);
    if (quant::cpu_has_avx2()) {
      float got = 0;
      quant::vec_dot_iq4_xs_q8_K_avx2(n, &got, wb, ab);
      EXPECT_EQ(bits(got), bits(want)) << got << " vs " << want;
      quant_traits(DType::IQ4_XS)->vec_dot(n, &got, w.data(), a.data());
      EXPECT_EQ(bits(got), bits(want)) << "the traits' vec_dot";
    }
    ++checked;
  }
  EXPECT_EQ(checked, 8);
}

// Each 8x4 tile kernel this CPU runs (Q4_0 and IQ4_NL: AVX2, AVX-512 VNNI) against the scalar
// reference of single dot products, on distinct rows (several block counts): rows quantized from
// random values, and arbitrary blocks (every nibble, so every IQ4_NL level including -127) against
// Q8_0 activations at their extremes (all 127, all -127, random -127..127), where the integer sums
// reach their bounds.
TEST(GgmlGolden, TileKernelsEqualSingleDots) {
  struct Kernel {
    const char* name;
    DType type;
    VecDot8x4Fn fn;
  };
  std::vector<Kernel> kernels;
  if (quant::cpu_has_avx2()) {
    kernels.push_back(
        {"q4_0 avx2", DType::Q4_0,
         [](int64_t n, float* s, size_t ss, const void* x, size_t xs, const void* y, size_t ys) {
           quant::vec_dot_q4_0_q8_0_rows8_8x4_avx2(n, s, ss, static_cast<const quant::BlockQ4_0*>(x), xs,
                                                   static_cast<const quant::BlockQ8_0*>(y), ys);
         }});
    kernels.push_back(
        {"iq4_nl avx2", DType::IQ4_NL,
         [](int64_t n, float* s, size_t ss, const void* x, size_t xs, const void* y, size_t ys) {
           quant::vec_dot_iq4_nl_q8_0_rows8_8x4_avx2(n, s, ss, static_cast<const quant::BlockIQ4NL*>(x), xs,
                                                     static_cast<const quant::BlockQ8_0*>(y), ys);
         }});
  }
  if (quant::cpu_has_avx512_vnni()) {
    kernels.push_back(
        {"q4_0 avx512", DType::Q4_0,
         [](int64_t n, float* s, size_t ss, const void* x, size_t xs, const void* y, size_t ys) {
           quant::vec_dot_q4_0_q8_0_rows8_8x4_avx512(n, s, ss, static_cast<const quant::BlockQ4_0*>(x), xs,
                                                     static_cast<const quant::BlockQ8_0*>(y), ys);
         }});
    kernels.push_back(
        {"iq4_nl avx512", DType::IQ4_NL,
         [](int64_t n, float* s, size_t ss, const void* x, size_t xs, const void* y, size_t ys) {
           quant::vec_dot_iq4_nl_q8_0_rows8_8x4_avx512(n, s, ss, static_cast<const quant::BlockIQ4NL*>(x), xs,
                                                       static_cast<const quant::BlockQ8_0*>(y), ys);
         }});
  }
  if (kernels.empty()) GTEST_SKIP() << "no tile kernel on this CPU";
  const QuantTraits* q8 = quant_traits(DType::Q8_0);
  uint32_t state = 12345;
  auto next_u32 = [&] {
    state = state * 1664525u + 1013904223u;
    return state;
  };
  auto next = [&] { return static_cast<float>(next_u32() >> 8) / static_cast<float>(1u << 24) - 0.5f; };
  for (const Kernel& kernel : kernels) {
    const QuantTraits* t = quant_traits(kernel.type);
    for (int64_t n : {32, 224, 256, 2048}) {
      for (bool extreme : {false, true}) {
        SCOPED_TRACE(std::string(kernel.name) + " n=" + std::to_string(n) +
                     (extreme ? " extreme" : " quantized"));
        std::vector<float> f(n);
        const int64_t nb = n / 32;
        const size_t w_stride = row_size(kernel.type, n) + 2, a_stride = row_size(DType::Q8_0, n) + 4;
        std::vector<uint8_t> w(8 * w_stride), a(4 * a_stride);
        for (int i = 0; i < 8; ++i) {
          uint8_t* row = w.data() + i * w_stride;
          if (!extreme) {
            for (float& v : f) v = next() * static_cast<float>(i + 1);
            t->from_float(f.data(), row, n);
            continue;
          }
          // Both formats are {F16 d; 16 bytes of nibbles}: arbitrary nibbles, row 0 all zero
          // nibbles (IQ4_NL's -127), row 1 all 15.
          for (int64_t b = 0; b < nb; ++b) {
            uint8_t* blk = row + b * 18;
            const uint16_t d =
                f32_to_f16(std::ldexp(1.0f + static_cast<float>(next_u32() % 1024) / 1024, -6));
            std::memcpy(blk, &d, sizeof(d));
            for (int j = 0; j < 16; ++j)
              blk[2 + j] = i == 0 ? 0x00 : i == 1 ? 0xFF : static_cast<uint8_t>(next_u32() >> 24);
          }
        }
        for (int r = 0; r < 4; ++r) {
          uint8_t* row = a.data() + r * a_stride;
          if (!extreme) {
            for (float& v : f) v = next() * static_cast<float>(r + 1);
            q8->from_float(f.data(), row, n);
            continue;
          }
          for (int64_t b = 0; b < nb; ++b) {
            auto* blk = reinterpret_cast<quant::BlockQ8_0*>(row + b * sizeof(quant::BlockQ8_0));
            blk->d = f32_to_f16(std::ldexp(1.0f + static_cast<float>(next_u32() % 1024) / 1024, -7));
            const int mode = (r + static_cast<int>(b)) % 3;  // all 127, all -127, random
            for (int e = 0; e < 32; ++e)
              blk->qs[e] = static_cast<int8_t>(mode == 0   ? 127
                                               : mode == 1 ? -127
                                                           : static_cast<int>(next_u32() % 255) - 127);
          }
        }
        float out[4][8];
        kernel.fn(n, &out[0][0], sizeof(out[0]), w.data(), w_stride, a.data(), a_stride);
        for (int r = 0; r < 4; ++r) {
          for (int i = 0; i < 8; ++i) {
            float want = 0;
            t->vec_dot_rows8_x4_ref(n, &want, w.data() + i * w_stride, a.data() + r * a_stride);
            EXPECT_EQ(bits(out[r][i]), bits(want)) << "weight row " << i << ", activation row " << r;
          }
        }
      }
    }
  }
}

}  // namespace
}  // namespace kiln
