// Comparison of kiln's logits with llama.cpp's reference outputs (tests/data/reference),
// with the tolerances of the text-generation issue. Shared by the conformance tests of every
// decoding path (the reference decoder now, the graph path next).
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <ostream>
#include <string>
#include <vector>

#include "test_data.h"

namespace kiln::testing {

struct Tolerance {
  double all_within;        // every compared logit within this
  double most_within;       // at least `most_fraction` of them within this
  double most_fraction;
  double top1_gap;          // top-1 must agree where the reference's top-1/top-2 gap exceeds this
};

// F32 model against M.json; quantized model against M.json; anything against M.f16kv-fa.json.
inline constexpr Tolerance kF32Tight{1e-3, 1e-3, 1.0, 2e-3};
inline constexpr Tolerance kQuantized{0.3, 5e-2, 0.95, 0.1};
inline constexpr Tolerance kF16Fa{0.5, 0.1, 0.90, 0.2};

// One reference file: a model and llama.cpp's outputs for it, computed with an F32 KV cache and
// no flash attention, or (f16kv_fa) with llama.cpp's defaults, an F16 cache and flash attention.
struct ReferenceVariant {
  std::string name;        // for test names and messages
  std::string model_path;  // the GGUF
  std::string ref_path;    // llama.cpp's outputs (oracle.mjs format)
  bool f16kv_fa;
  Tolerance tol;
};

inline void PrintTo(const ReferenceVariant& v, std::ostream* os) {
  *os << v.name << (v.f16kv_fa ? " f16kv-fa" : " f32kv");
}

inline std::string variant_name(const ::testing::TestParamInfo<ReferenceVariant>& info) {
  std::string n = info.param.name + (info.param.f16kv_fa ? "_f16kv_fa" : "_f32kv");
  for (char& c : n) {
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  }
  return n;
}

// Every fixture model with both of its reference files, plus kiln's own rope-variant models
// (tests/conformance/data: per-dimension frequency factors with a prompt past 1000 tokens, YaRN).
inline std::vector<ReferenceVariant> all_reference_variants() {
  const std::string data = std::string(KILN_SOURCE_DIR) + "/tests/conformance/data/";
  std::vector<ReferenceVariant> v;
  for (bool fa : {false, true}) {
    const char* suffix = fa ? ".f16kv-fa.json" : ".json";
    const Tolerance quant = fa ? kF16Fa : kQuantized;
    v.push_back({"llama-spm-e128-f32", test_data::path("models/llama-spm-e128-f32.gguf"),
                 test_data::path(std::string("reference/llama-spm-e128-f32") + suffix), fa, fa ? kF16Fa : kF32Tight});
    // reference/llama-spm-e256-IQ4_XS*.json are recorded but not listed: they were recorded on an
    // AVX2-only CPU (their system_info has no AVX512), the others on an AVX-512 one, whose float
    // orders kiln follows (layouts.h gemm_f16). With ggml's IQ panel order for prompts most rows
    // are exact, but with the F32 KV cache 92% of the logits are within 0.05 (95% required; 88%
    // before), max 0.30: rows from some position on (27 of the 45-token prompt) jump where the AVX2
    // build's float products round otherwise. llama.cpp itself built for AVX2 gives the IQ4_XS
    // reference's prompt logits exactly and the Q6_K reference's with the same kind of jump (99.7%
    // within 0.05, max 0.10): they need recording again on the AVX-512 CPU.
    for (const char* m : {"llama-spm-e256-Q4_0", "llama-spm-e256-Q4_K_M", "llama-spm-e256-Q6_K", "qwen2-e64-Q8_0",
                          "qwen3-e64-Q8_0"})
      v.push_back({m, test_data::path(std::string("models/") + m + ".gguf"),
                   test_data::path(std::string("reference/") + m + suffix), fa, quant});
  }
  for (const char* m : {"llama-ropefreqs", "qwen2-yarn"})
    v.push_back({m, data + m + ".gguf", data + m + ".json", false, kF32Tight});
  return v;
}

inline nlohmann::json load_json(const std::string& path) {
  std::ifstream in(path);
  EXPECT_TRUE(in.good()) << "cannot open " << path;
  return nlohmann::json::parse(in);
}

// Accumulates logit differences over a whole reference file and checks the tolerance at the end.
class LogitComparison {
 public:
  explicit LogitComparison(Tolerance tol) : tol_(tol) {}

  // `ref_top`: [[token, logit], ...] sorted descending; `logits`: kiln's full row.
  void compare_row(const nlohmann::json& ref_top, const float* logits, const std::string& where) {
    for (const auto& pair : ref_top) {
      const int token = pair[0].get<int>();
      const double diff = std::fabs(static_cast<double>(logits[token]) - pair[1].get<double>());
      ++n_;
      if (diff <= tol_.most_within) ++n_close_;
      max_diff_ = std::max(max_diff_, diff);
      EXPECT_LE(diff, tol_.all_within) << where << " token " << token;
    }
    check_top1(ref_top, logits, where);
  }

  // Top-1 agreement where the reference's gap is clear.
  void check_top1(const nlohmann::json& ref_top, const float* logits, const std::string& where) {
    if (ref_top.size() < 2) return;
    const double gap = ref_top[0][1].get<double>() - ref_top[1][1].get<double>();
    if (gap <= tol_.top1_gap) return;
    const int want = ref_top[0][0].get<int>();
    int best = 0;
    for (int i = 1; i < n_vocab_; ++i) {
      if (logits[i] > logits[best]) best = i;
    }
    ++n_top1_;
    EXPECT_EQ(best, want) << where << " (reference gap " << gap << ")";
  }

  void set_vocab(int n_vocab) { n_vocab_ = n_vocab; }

  void finish(const std::string& what) {
    ASSERT_GT(n_, 0) << what << ": nothing compared";
    const double fraction = static_cast<double>(n_close_) / static_cast<double>(n_);
    EXPECT_GE(fraction, tol_.most_fraction) << what << ": only " << fraction << " of logits within "
                                            << tol_.most_within;
    ::testing::Test::RecordProperty("max_logit_diff", std::to_string(max_diff_));
    std::printf("[ %s ] %ld logits, max |diff| %.3g, %.2f%% within %.3g, %ld top-1 checks\n", what.c_str(),
                static_cast<long>(n_), max_diff_, 100.0 * fraction, tol_.most_within, static_cast<long>(n_top1_));
  }

 private:
  Tolerance tol_;
  int n_vocab_ = 0;
  int64_t n_ = 0, n_close_ = 0, n_top1_ = 0;
  double max_diff_ = 0.0;
};

}  // namespace kiln::testing
