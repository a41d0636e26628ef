// The graph path (llm/Context on the CPU backend) against llama.cpp's outputs for every fixture
// model and case, and the promise that results do not depend on batch composition.
#include "llm/context.h"

#include <gtest/gtest.h>

#include <cmath>
#include <ostream>

#include "conformance/reference_check.h"
#include "llm/cpu_engine.h"
#include "test_data.h"

namespace kiln {
namespace {


std::shared_ptr<const Model> load(const std::string& stem) {
  auto m = Model::load(test_data::path("models/" + stem + ".gguf"));
  EXPECT_TRUE(m.ok()) << m.error().message;
  return m.ok() ? *m : nullptr;
}

class ContextConformance : public ::testing::TestWithParam<testing::ReferenceVariant> {};

TEST_P(ContextConformance, MatchesLlamaCpp) {
  const testing::ReferenceVariant& v = GetParam();
  auto loaded = Model::load(v.model_path);
  ASSERT_TRUE(loaded.ok()) << loaded.error().message;
  auto model = *loaded;
  const auto ref = testing::load_json(v.ref_path);
  CpuEngine engine(2);
  ContextOptions opt;
  opt.n_ctx = 2048;
  opt.n_ubatch = 64;  // long prompts span several micro-batches
  opt.type_k = opt.type_v = v.f16kv_fa ? DType::F16 : DType::F32;
  opt.flash_attention = v.f16kv_fa ? FlashAttention::On : FlashAttention::Off;
  auto ctx = Context::create(model, engine.backend, opt);
  ASSERT_TRUE(ctx.ok()) << ctx.error().message;
  Context& c = **ctx;

  testing::LogitComparison cmp(v.tol);
  cmp.set_vocab(static_cast<int>(c.n_vocab()));
  for (const auto& cs : ref["cases"]) {
    const auto tokens = cs["tokens"].get<std::vector<int32_t>>();
    c.clear();
    Batch batch;
    for (size_t i = 0; i < tokens.size(); ++i) batch.add(tokens[i], static_cast<int32_t>(i), 0, true);
    const Status st = c.decode(batch);
    ASSERT_TRUE(st.ok()) << st.error().message;
    const std::string text = cs["text"].get<std::string>().substr(0, 24);
    for (const auto& row : cs["logits"]) {
      const int pos = row["pos"].get<int>();
      cmp.compare_row(row["top"], c.logits(static_cast<size_t>(pos)).data(), "'" + text + "' pos " + std::to_string(pos));
    }
    std::vector<float> last(c.logits(tokens.size() - 1).begin(), c.logits(tokens.size() - 1).end());
    int32_t pos = static_cast<int32_t>(tokens.size());
    const auto& greedy = cs["greedy"];
    for (size_t k = 0; k < greedy.size(); ++k) {
      cmp.compare_row(cs["greedy_logits"][k], last.data(), "'" + text + "' greedy " + std::to_string(k));
      Batch next;
      next.add(greedy[k].get<int32_t>(), pos++, 0, true);
      const Status s2 = c.decode(next);
      ASSERT_TRUE(s2.ok()) << s2.error().message;
      last.assign(c.logits(0).begin(), c.logits(0).end());
    }
  }
  cmp.finish(testing::variant_name(::testing::TestParamInfo<testing::ReferenceVariant>(v, 0)));
}

INSTANTIATE_TEST_SUITE_P(Fixtures, ContextConformance, ::testing::ValuesIn(testing::all_reference_variants()),
                         testing::variant_name);

// The same prompt alone, in a batch with three other sequences, and fed one token at a time gives
// the same logits (1e-4 for F32 weights, 1e-3 for quantized).
class BatchInvariance : public ::testing::TestWithParam<std::pair<std::string, double>> {};

TEST_P(BatchInvariance, LogitsDoNotDependOnBatchComposition) {
  const auto& [stem, tol] = GetParam();
  auto model = load(stem);
  ASSERT_TRUE(model);
  CpuEngine engine(2);
  ContextOptions opt;
  opt.n_ctx = 256;
  opt.n_ubatch = 32;
  opt.type_k = opt.type_v = DType::F32;
  auto ctx = Context::create(model, engine.backend, opt);
  ASSERT_TRUE(ctx.ok()) << ctx.error().message;
  Context& c = **ctx;
  const auto& tok = model->tokenizer();
  const std::vector<int32_t> prompt = tok.tokenize("The quick brown fox jumps over the lazy dog", true, false);
  const std::vector<std::vector<int32_t>> others = {
      tok.tokenize("Once upon a time", true, false),
      tok.tokenize("def f(x): return x * 2 + 1  # twice plus one", true, false),
      tok.tokenize("Ça et là, 東京", true, false)};
  const size_t n = prompt.size();
  auto all_logits = [&](auto&& fill) {
    c.clear();
    std::vector<std::vector<float>> rows(n);
    fill(rows);
    return rows;
  };
  const auto alone = all_logits([&](auto& rows) {
    Batch b;
    for (size_t i = 0; i < n; ++i) b.add(prompt[i], static_cast<int32_t>(i), 0, true);
    ASSERT_TRUE(c.decode(b).ok());
    for (size_t i = 0; i < n; ++i) rows[i].assign(c.logits(i).begin(), c.logits(i).end());
  });
  const auto mixed = all_logits([&](auto& rows) {
    // Interleave: other sequences' tokens first and between ours, sequence 2 for ours.
    Batch b;
    std::vector<size_t> at(n);
    for (size_t i = 0; i < n; ++i) {
      for (size_t s = 0; s < others.size(); ++s) {
        if (i < others[s].size()) b.add(others[s][i], static_cast<int32_t>(i), s == 2 ? 3 : static_cast<int32_t>(s), true);
      }
      at[i] = b.size();
      b.add(prompt[i], static_cast<int32_t>(i), 2, true);
    }
    const Status st = c.decode(b);
    ASSERT_TRUE(st.ok()) << st.error().message;
    for (size_t i = 0; i < n; ++i) rows[i].assign(c.logits(at[i]).begin(), c.logits(at[i]).end());
  });
  const auto one_by_one = all_logits([&](auto& rows) {
    for (size_t i = 0; i < n; ++i) {
      Batch b;
      b.add(prompt[i], static_cast<int32_t>(i), 1, true);
      ASSERT_TRUE(c.decode(b).ok());
      rows[i].assign(c.logits(0).begin(), c.logits(0).end());
    }
  });
  double worst_mixed = 0, worst_single = 0;
  for (size_t i = 0; i < n; ++i) {
    ASSERT_EQ(alone[i].size(), static_cast<size_t>(c.n_vocab()));
    for (size_t j = 0; j < alone[i].size(); ++j) {
      worst_mixed = std::max(worst_mixed, static_cast<double>(std::fabs(alone[i][j] - mixed[i][j])));
      worst_single = std::max(worst_single, static_cast<double>(std::fabs(alone[i][j] - one_by_one[i][j])));
    }
  }
  EXPECT_LE(worst_mixed, tol);
  EXPECT_LE(worst_single, tol);
  std::printf("[ %s ] max |diff| mixed batch %.3g, one at a time %.3g\n", stem.c_str(), worst_mixed, worst_single);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, BatchInvariance,
                         ::testing::Values(std::make_pair(std::string("llama-spm-e128-f32"), 1e-4),
                                           std::make_pair(std::string("llama-spm-e256-Q4_K_M"), 1e-3),
                                           std::make_pair(std::string("qwen3-e64-Q8_0"), 1e-3)));

}  // namespace
}  // namespace kiln
