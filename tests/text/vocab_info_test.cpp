// Special ids, BOS/EOS flags, the end-of-generation set and detokenization against llama.cpp, from
// tests/text/data/vocab_info.json (written by tests/text/data/vocab_info.mjs with the oracle's
// node-llama-cpp: detokenize there is llama_detokenize(remove_special = false,
// unparse_special = special)).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "test_util.h"

namespace kiln::text {
namespace {

using testing::fixture_tokenizer;
using testing::read_file;
using testing::source_path;

const nlohmann::json& info() {
  static const nlohmann::json j =
      nlohmann::json::parse(read_file(source_path("tests/text/data/vocab_info.json")));
  return j;
}

int32_t id_or_null(const nlohmann::json& v) { return v.is_null() ? kTokenNull : v.get<int32_t>(); }

class VocabInfo : public ::testing::TestWithParam<std::string> {};

TEST_P(VocabInfo, SpecialIdsMatchLlamaCpp) {
  const Tokenizer& tok = fixture_tokenizer(GetParam());
  const auto& ref = info().at(GetParam());
  EXPECT_EQ(tok.bos(), id_or_null(ref.at("bos")));
  EXPECT_EQ(tok.eos(), id_or_null(ref.at("eos")));
  EXPECT_EQ(tok.eot(), id_or_null(ref.at("eot")));
  EXPECT_EQ(tok.sep(), id_or_null(ref.at("sep")));
  EXPECT_EQ(tok.nl(), id_or_null(ref.at("nl")));
  EXPECT_EQ(tok.add_bos(), ref.at("add_bos").get<bool>());
  EXPECT_EQ(tok.add_eos(), ref.at("add_eos").get<bool>());
  const auto eog = ref.at("eog").get<std::vector<int32_t>>();
  EXPECT_EQ(std::vector<int32_t>(tok.vocab().eog_ids().begin(), tok.vocab().eog_ids().end()), eog);
  for (int32_t id : eog) EXPECT_TRUE(tok.is_eog(id));
  EXPECT_FALSE(tok.is_eog(kTokenNull));
  EXPECT_FALSE(tok.is_eog(5));
}

TEST_P(VocabInfo, DetokenizeMatchesLlamaCpp) {
  const Tokenizer& tok = fixture_tokenizer(GetParam());
  for (const auto& c : info().at(GetParam()).at("detok")) {
    const auto text = c.at("text").get<std::string>();
    const bool special = c.at("special").get<bool>();
    const auto tokens = c.at("tokens").get<std::vector<int32_t>>();
    EXPECT_EQ(tok.tokenize(text, false, special), tokens) << text;
    auto out = tok.detokenize(tokens, /*remove_special=*/false, /*unparse_special=*/special);
    ASSERT_TRUE(out.ok()) << out.error().message;
    EXPECT_EQ(*out, c.at("detokenized").get<std::string>()) << text << " special=" << special;
  }
}

INSTANTIATE_TEST_SUITE_P(Vocabs, VocabInfo, ::testing::ValuesIn(testing::kAllVocabs),
                         testing::vocab_test_name);

TEST(VocabInfo, EveryVocabularyHasReferences) {
  for (const std::string& v : testing::kAllVocabs) EXPECT_TRUE(info().contains(v)) << v;
  EXPECT_EQ(info().size(), testing::kAllVocabs.size());
}

}  // namespace
}  // namespace kiln::text
