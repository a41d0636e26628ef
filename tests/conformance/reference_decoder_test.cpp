// The reference decoder against llama.cpp's outputs for every fixture model and case: tokens are
// taken from the reference (tokenization has its own tests), logits compared at every reference
// position, and greedy decoding checked by teacher forcing (feeding llama.cpp's greedy tokens).
#include "models/reference_decoder.h"

#include <gtest/gtest.h>

#include <ostream>

#include "conformance/reference_check.h"
#include "test_data.h"

namespace kiln {
namespace {

class ReferenceDecoderConformance : public ::testing::TestWithParam<testing::ReferenceVariant> {};

TEST_P(ReferenceDecoderConformance, MatchesLlamaCpp) {
  const testing::ReferenceVariant& v = GetParam();
  auto file = GgufFile::open(v.model_path);
  ASSERT_TRUE(file.ok()) << file.error().message;
  const auto ref = testing::load_json(v.ref_path);
  ReferenceDecoderOptions opt;
  opt.n_ctx = 2048;
  opt.kv_type = v.f16kv_fa ? DType::F16 : DType::F32;
  opt.attention = v.f16kv_fa ? AttentionPath::Flash : AttentionPath::Plain;
  auto dec = ReferenceDecoder::create(**file, opt);
  ASSERT_TRUE(dec.ok()) << dec.error().message;
  const int n_vocab = static_cast<int>((*dec)->hparams().n_vocab);

  testing::LogitComparison cmp(v.tol);
  cmp.set_vocab(n_vocab);
  for (const auto& c : ref["cases"]) {
    const std::vector<int32_t> tokens = c["tokens"].get<std::vector<int32_t>>();
    (*dec)->reset();
    auto logits = (*dec)->decode(tokens);
    ASSERT_TRUE(logits.ok()) << logits.error().message;
    const std::string text = c["text"].get<std::string>().substr(0, 24);
    for (const auto& row : c["logits"]) {
      const int pos = row["pos"].get<int>();
      cmp.compare_row(row["top"], logits->data() + static_cast<size_t>(pos) * n_vocab,
                      "'" + text + "' pos " + std::to_string(pos));
    }
    // Teacher forcing: before greedy token k, kiln's logits must agree with greedy_logits[k].
    std::vector<float> last(logits->end() - n_vocab, logits->end());
    const auto& greedy = c["greedy"];
    for (size_t k = 0; k < greedy.size(); ++k) {
      cmp.compare_row(c["greedy_logits"][k], last.data(), "'" + text + "' greedy " + std::to_string(k));
      auto next = (*dec)->decode(std::vector<int32_t>{greedy[k].get<int32_t>()});
      ASSERT_TRUE(next.ok()) << next.error().message;
      last = *next;
    }
  }
  cmp.finish(testing::variant_name(::testing::TestParamInfo<testing::ReferenceVariant>(v, 0)));
}

INSTANTIATE_TEST_SUITE_P(Fixtures, ReferenceDecoderConformance, ::testing::ValuesIn(testing::all_reference_variants()),
                         testing::variant_name);

TEST(ReferenceDecoder, RejectsBadTokensAndContextOverflow) {
  auto file = GgufFile::open(test_data::path("models/qwen3-e64-Q8_0.gguf"));
  ASSERT_TRUE(file.ok()) << file.error().message;
  ReferenceDecoderOptions opt;
  opt.n_ctx = 4;
  auto dec = ReferenceDecoder::create(**file, opt);
  ASSERT_TRUE(dec.ok()) << dec.error().message;
  const int32_t n_vocab = static_cast<int32_t>((*dec)->hparams().n_vocab);
  auto bad = (*dec)->decode(std::vector<int32_t>{1, n_vocab});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message.find("outside the vocabulary"), std::string::npos) << bad.error().message;
  auto too_long = (*dec)->decode(std::vector<int32_t>{1, 2, 3, 4, 5});
  ASSERT_FALSE(too_long.ok());
  EXPECT_NE(too_long.error().message.find("exceed the context size 4"), std::string::npos);
  EXPECT_EQ((*dec)->n_past(), 0);
  ASSERT_TRUE((*dec)->decode(std::vector<int32_t>{1, 2, 3, 4}).ok());
}

}  // namespace
}  // namespace kiln
