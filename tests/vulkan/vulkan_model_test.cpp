// Every fixture model on vulkan0 against the CPU (a GPU does not reproduce the CPU's float order):
// a prompt, then 32 greedy steps driven by the CPU's choices, with an F32 KV cache (plain attention)
// and an F16 one (flash attention). The shaders round activations as the CPU does, so a step's
// logits agree to a normalized error near 1e-12 - until a difference of one ulp upstream moves one
// activation across a rounding boundary of its Q8_0/Q8_K quantization (models with quantized
// weights): that step's logits then differ by about 1% (NMSE ~1e-4, measured), and on these
// random-weight models top-two margins are often smaller than that. So: on steps that agree
// (NMSE < 1e-6) the GPU must choose the CPU's token wherever the CPU's top-two margin exceeds 1e-3
// (the rule); on the others (and every later step: the KV cache keeps the moved rows) the
// logits must still agree to NMSE < 1e-3 and the token wherever the margin exceeds 0.1. The run's
// perplexity is within 0.5% of the
// CPU's for float weights, 1% for quantized ones (the same rounding steps).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "llm/context.h"
#include "llm/device_weights.h"
#include "llm/model_test_util.h"
#include "test_data.h"
#include "vulkan_test_util.h"

namespace kiln::test {
namespace {

// -log softmax(logits)[target]
double nll(std::span<const float> logits, int32_t target) {
  const float mx = *std::max_element(logits.begin(), logits.end());
  double sum = 0;
  for (float v : logits) sum += std::exp(static_cast<double>(v) - mx);
  return std::log(sum) - (static_cast<double>(logits[static_cast<size_t>(target)]) - mx);
}

double top_two_margin(std::span<const float> v) {
  std::vector<float> c(v.begin(), v.end());
  std::partial_sort(c.begin(), c.begin() + 2, c.end(), std::greater<float>());
  return static_cast<double>(c[0]) - c[1];
}

struct Variant {
  DType kv;
  FlashAttention fa;
};

class VulkanMatchesCpu : public ::testing::TestWithParam<std::string> {};

TEST_P(VulkanMatchesCpu, GreedyTokensAndPerplexityAgree) {
  auto model = load(GetParam());
  ASSERT_TRUE(model);
  auto devices = vulkan_registry();
  ASSERT_TRUE(devices);
  for (const Variant v : {Variant{DType::F32, FlashAttention::Off}, Variant{DType::F16, FlashAttention::On}}) {
    const std::string what = "kv " + std::string(dtype_name(v.kv));
    SCOPED_TRACE(what);
    const ContextOptions opt{
        .n_ctx = 64, .n_batch = 64, .n_ubatch = 16, .type_k = v.kv, .type_v = v.kv, .flash_attention = v.fa};
    OnDevice cpu = place(*devices, "cpu", model, opt);
    OnDevice gpu = place(*devices, "vulkan0", model, opt);
    ASSERT_TRUE(cpu.ctx && gpu.ctx);
    const int64_t n_vocab = cpu.ctx->n_vocab();
    std::vector<int32_t> tokens = spread_tokens(*cpu.ctx, 12);
    std::vector<float> lc, lg;
    decode(*cpu.ctx, tokens, 0, 0, true, lc);
    decode(*gpu.ctx, tokens, 0, 0, true, lg);
    int compared = 0;
    for (int step = 0; step < 32; ++step) {
      const std::span<const float> c(lc.end() - n_vocab, lc.end()), g(lg.end() - n_vocab, lg.end());
      const int32_t next = argmax(c);
      const double err = nmse({c.begin(), c.end()}, {g.begin(), g.end()});
      EXPECT_LT(err, 1e-3) << "step " << step;
      const bool agree = err < 1e-6;
      if (top_two_margin(c) > (agree ? 1e-3 : 0.1)) {
        EXPECT_EQ(argmax(g), next) << "step " << step;
        ++compared;
      }
      tokens.push_back(next);
      const int32_t pos = static_cast<int32_t>(tokens.size()) - 1;
      decode(*cpu.ctx, {next}, pos, 0, true, lc);
      decode(*gpu.ctx, {next}, pos, 0, true, lg);
    }
    EXPECT_GT(compared, 16) << "too few clear choices to compare";
    double nll_c = 0, nll_g = 0;
    for (size_t i = 0; i + 1 < tokens.size(); ++i) {
      nll_c += nll({lc.begin() + static_cast<int64_t>(i) * n_vocab, static_cast<size_t>(n_vocab)}, tokens[i + 1]);
      nll_g += nll({lg.begin() + static_cast<int64_t>(i) * n_vocab, static_cast<size_t>(n_vocab)}, tokens[i + 1]);
    }
    const double n = static_cast<double>(tokens.size() - 1);
    const double ppl_c = std::exp(nll_c / n), ppl_g = std::exp(nll_g / n);
    const auto& tensors = model->file().tensors();
    const bool quantized =
        std::any_of(tensors.begin(), tensors.end(), [](const GgufTensorInfo& t) { return info(t.type).quantized; });
    EXPECT_LT(std::abs(ppl_g - ppl_c) / ppl_c, quantized ? 0.01 : 0.005) << "perplexity cpu " << ppl_c << ", vulkan " << ppl_g;
  }
}

INSTANTIATE_TEST_SUITE_P(Models, VulkanMatchesCpu, ::testing::ValuesIn(fixture_models()), model_param_name);

}  // namespace
}  // namespace kiln::test
