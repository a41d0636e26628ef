// The default model (models/kjv-llama, trained by tools/train/train.py) through kiln's own forward
// pass: its F32 conversion gives PyTorch's logits, and the shipped Q8_0 file scores held-out text
// within 2% of the F32 file's perplexity.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "conformance/reference_check.h"
#include "convert/converter.h"
#include "llm/context.h"
#include "llm/cpu_engine.h"
#include "llm/perplexity.h"

namespace kiln {
namespace {

const std::string kSource = KILN_SOURCE_DIR;

// A file removed when the test process exits.
struct TempFile {
  std::string path;
  ~TempFile() { std::remove(path.c_str()); }
};

// Converts the checkpoint to F32 once per test process (ctest runs these tests as parallel
// processes, and one must not rewrite a file another has mapped: hence the pid in the name).
const std::string& f32_model_path() {
  static const TempFile file{std::string(KILN_BINARY_DIR) + "/kjv-llama-f32.test." + std::to_string(getpid()) + ".gguf"};
  static const bool converted = [] {
    convert::ConvertOptions opt;
    opt.hf_dir = kSource + "/models/kjv-llama";
    opt.out_path = file.path;
    opt.out_type = convert::OutType::F32;
    auto r = convert::convert_hf_checkpoint(opt);
    EXPECT_TRUE(r.ok()) << r.error().message;
    return r.ok();
  }();
  (void)converted;
  return file.path;
}

std::unique_ptr<Context> make_context(const std::shared_ptr<const Model>& m, CpuEngine& engine) {
  ContextOptions opt;
  opt.n_ctx = 256;
  opt.type_k = opt.type_v = DType::F32;
  opt.flash_attention = FlashAttention::Off;
  auto c = Context::create(m, engine.backend, opt);
  EXPECT_TRUE(c.ok()) << c.error().message;
  return c.ok() ? std::move(*c) : nullptr;
}

TEST(DefaultModel, F32ConversionMatchesPyTorch) {
  auto model = Model::load(f32_model_path());
  ASSERT_TRUE(model.ok()) << model.error().message;
  CpuEngine engine(2);
  auto ctx = make_context(*model, engine);
  ASSERT_TRUE(ctx);
  const auto ref = testing::load_json(kSource + "/tests/convert/data/kjv_llama_ref.json");
  ASSERT_FALSE(ref["prompts"].empty());
  for (const auto& p : ref["prompts"]) {
    const auto want_tokens = p["tokens"].get<std::vector<int32_t>>();
    const auto tokens = (*model)->tokenizer().tokenize(p["text"].get<std::string>(), true, false);
    EXPECT_EQ(tokens, want_tokens) << p["text"];
    ctx->clear();
    Batch b;
    for (size_t i = 0; i < want_tokens.size(); ++i) b.add(want_tokens[i], static_cast<int32_t>(i), 0, i + 1 == want_tokens.size());
    const Status st = ctx->decode(b);
    ASSERT_TRUE(st.ok()) << st.error().message;
    const auto logits = ctx->logits(want_tokens.size() - 1);
    const auto want = p["last_logits"].get<std::vector<float>>();
    ASSERT_EQ(logits.size(), want.size());
    double worst = 0;
    for (size_t i = 0; i < want.size(); ++i) worst = std::max(worst, static_cast<double>(std::fabs(logits[i] - want[i])));
    EXPECT_LE(worst, 1e-3) << p["text"];
  }
}

double perplexity_of(const std::string& path, const std::vector<int32_t>& tokens, int32_t bos) {
  auto model = Model::load(path);
  EXPECT_TRUE(model.ok()) << model.error().message;
  if (!model.ok()) return 0.0;
  CpuEngine engine(2);
  auto ctx = make_context(*model, engine);
  NllAccumulator nll;
  ChunkScoring scoring;
  scoring.n_ctx = 128;
  scoring.bos = bos;
  scoring.max_chunks = 8;  // 8 x 64 scored tokens: enough for a 2% comparison, quick under ASan
  const Status st = score_chunks(*ctx, tokens, scoring, [&](std::span<const float> logits, int32_t target) {
    nll.add(-log_prob(logits, target));
    return ok_status();
  });
  EXPECT_TRUE(st.ok()) << st.error().message;
  return nll.perplexity();
}

TEST(DefaultModel, Q8_0PerplexityWithinTwoPercentOfF32) {
  std::ifstream in(kSource + "/tests/convert/data/heldout_jude_rev1-3.txt");
  std::stringstream text;
  text << in.rdbuf();
  auto q8 = Model::load(kSource + "/models/kjv-llama-q8_0.gguf");
  ASSERT_TRUE(q8.ok()) << q8.error().message;
  const auto& tok = (*q8)->tokenizer();
  const auto tokens = tok.tokenize(text.str(), true, false);
  const int32_t bos = tok.add_bos() ? tok.bos() : -1;
  const double ppl_f32 = perplexity_of(f32_model_path(), tokens, bos);
  const double ppl_q8 = perplexity_of(kSource + "/models/kjv-llama-q8_0.gguf", tokens, bos);
  std::printf("[ default model ] held-out perplexity: F32 %.4f, Q8_0 %.4f (%zu tokens)\n", ppl_f32, ppl_q8, tokens.size());
  ASSERT_GT(ppl_f32, 1.0);
  EXPECT_LE(std::fabs(ppl_q8 - ppl_f32) / ppl_f32, 0.02);
}

}  // namespace
}  // namespace kiln
