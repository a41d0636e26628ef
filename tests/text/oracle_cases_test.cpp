// Hard cases (whitespace runs, long words, many scripts, emoji, control characters, special tokens
// with and without parse_special) against llama.cpp's tokenization of the same text. The cases are
// tests/text/data/hard_cases.json; the references ref-VOCAB.json were written by
//   NODE_PATH=... node ../shared/tools/oracle.mjs ../shared/fixtures/vocab/ggml-vocab-VOCAB.gguf
//       tests/text/data/hard_cases.json > tests/text/data/ref-VOCAB.json
// (llama.cpp via node-llama-cpp 3.22.1: tokens are BOS, when llama.cpp adds one, then
// llama_tokenize(text, add_special = false, parse_special = special)).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "test_util.h"
#include "text/unicode.h"

namespace kiln::text {
namespace {

using testing::fixture_tokenizer;
using testing::read_file;
using testing::source_path;

struct OracleCase {
  std::string text;
  bool special = false;
  bool add_bos = false;
  std::vector<int32_t> tokens;
};

std::vector<OracleCase> load_reference(const std::string& vocab) {
  const auto ref = nlohmann::json::parse(read_file(source_path("tests/text/data/ref-" + vocab + ".json")));
  std::vector<OracleCase> cases;
  for (const auto& c : ref.at("cases")) {
    cases.push_back({c.at("text").get<std::string>(), c.at("special").get<bool>(),
                     c.at("add_bos").get<bool>(), c.at("tokens").get<std::vector<int32_t>>()});
  }
  return cases;
}

class OracleCases : public ::testing::TestWithParam<std::string> {};

TEST_P(OracleCases, TokensMatchLlamaCpp) {
  const Tokenizer& tok = fixture_tokenizer(GetParam());
  const auto cases = load_reference(GetParam());
  ASSERT_EQ(cases.size(), 74u);
  for (const OracleCase& c : cases) {
    // the oracle reports llama.cpp's add_bos default for the vocabulary
    EXPECT_EQ(c.add_bos, tok.add_bos()) << "add_bos default";
    std::vector<int32_t> ids;
    if (c.add_bos && tok.bos() != kTokenNull) ids.push_back(tok.bos());
    const std::vector<int32_t> body = tok.tokenize(c.text, /*add_special=*/false, c.special);
    ids.insert(ids.end(), body.begin(), body.end());
    EXPECT_EQ(ids, c.tokens) << "text: '" << c.text << "' special=" << c.special;
  }
}

TEST_P(OracleCases, AddSpecialAddsWhatTheVocabularyAsks) {
  const Tokenizer& tok = fixture_tokenizer(GetParam());
  for (const OracleCase& c : load_reference(GetParam())) {
    if (!c.add_bos) continue;
    std::vector<int32_t> with = tok.tokenize(c.text, /*add_special=*/true, c.special);
    ASSERT_FALSE(with.empty());
    EXPECT_EQ(with.front(), tok.bos());
    if (tok.vocab().type() == VocabType::kWpm) {  // BERT: [CLS] ... [SEP]
      EXPECT_EQ(with.back(), tok.sep());
      with.pop_back();
    }
    EXPECT_EQ(with, c.tokens) << "text: '" << c.text << "'";
  }
}

TEST_P(OracleCases, DetokenizeRoundTrips) {
  const Tokenizer& tok = fixture_tokenizer(GetParam());
  if (tok.vocab().type() == VocabType::kWpm) {
    // WordPiece lowercases and splits punctuation; its pieces carry a leading space per word
    auto text = tok.detokenize(tok.tokenize("Hello World!", false, false), false, false);
    ASSERT_TRUE(text.ok());
    EXPECT_EQ(*text, " hello world!");
    return;
  }
  int checked = 0;
  for (const OracleCase& c : load_reference(GetParam())) {
    if (c.special) continue;
    const bool cleanable = c.text.find(" ?") != std::string::npos || c.text.find(" !") != std::string::npos ||
                           c.text.find(" .") != std::string::npos || c.text.find(" ,") != std::string::npos ||
                           c.text.find(" '") != std::string::npos;
    if (tok.vocab().clean_spaces() && cleanable) continue;
    auto text = tok.detokenize(tok.tokenize(c.text, false, false), false, false);
    ASSERT_TRUE(text.ok()) << text.error().message;
    EXPECT_EQ(*text, c.text);
    ++checked;
  }
  EXPECT_GT(checked, 40);
}

TEST_P(OracleCases, InvalidUtf8IsReplacementCharacter) {
  // llama.cpp decodes each invalid byte as U+FFFD. For BPE and WPM that equals tokenizing the
  // replacement character (checked against the oracle above through "a\ufffdb"); SPM instead
  // keeps the raw byte and falls back to its byte token.
  const Tokenizer& tok = fixture_tokenizer(GetParam());
  const std::string invalid =
      "a\xff"
      "b";
  const std::vector<int32_t> ids = tok.tokenize(invalid, false, false);
  if (tok.vocab().type() == VocabType::kSpm) {
    EXPECT_NE(std::find(ids.begin(), ids.end(), tok.vocab().find("<0xFF>")), ids.end());
    EXPECT_EQ(*tok.detokenize(ids, false, false), invalid);
  } else {
    EXPECT_EQ(ids, tok.tokenize("a\xEF\xBF\xBD"
                                "b",
                                false, false));
  }
  // truncated sequences, lone continuation bytes, bytes that never occur in UTF-8
  for (std::string s : {"\xE2\x82", "\x80\x80", "\xC0", "\xF8\x88\x80\x80\x80", "ok\xF0\x9F\x98"}) {
    const std::vector<int32_t> t = tok.tokenize(s, true, true);
    for (int32_t id : t) EXPECT_TRUE(tok.vocab().valid(id));
    EXPECT_TRUE(tok.detokenize(t, true, true).ok());
  }
}

INSTANTIATE_TEST_SUITE_P(Vocabs, OracleCases,
                         ::testing::Values("llama-spm", "llama-bpe", "qwen2", "gpt-2", "phi-3", "bert-bge"),
                         [](const auto& info) {
                           std::string n = info.param;
                           for (char& ch : n)
                             if (ch == '-') ch = '_';
                           return n;
                         });

}  // namespace
}  // namespace kiln::text
