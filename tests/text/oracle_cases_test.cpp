// Hard cases (whitespace runs, long words, many scripts, emoji, control characters, special tokens
// with and without parse_special) against llama.cpp's tokenization of the same text. The cases are
// tests/text/data/hard_cases.json, for every vocabulary llama.cpp ships; the references
// ref-VOCAB.json were written by tests/text/data/make_refs.sh (llama.cpp via node-llama-cpp 3.22.1:
// tokens are BOS, when llama.cpp adds one, then llama_tokenize(text, add_special = false,
// parse_special = special)).
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
  ASSERT_EQ(cases.size(), 97u);
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

// With add_special, the vocabulary's BOS (which the references include when llama.cpp adds it),
// EOS when it asks for one (UGM's do), and BERT's [SEP]. (vocab_info_test checks the add_bos and
// add_eos flags themselves against llama.cpp.)
TEST_P(OracleCases, AddSpecialAddsWhatTheVocabularyAsks) {
  const Tokenizer& tok = fixture_tokenizer(GetParam());
  for (const OracleCase& c : load_reference(GetParam())) {
    std::vector<int32_t> want = c.tokens;
    if (tok.add_eos()) want.push_back(tok.eos());
    if (tok.vocab().type() == VocabType::kWpm) want.push_back(tok.sep());  // BERT: [CLS] ... [SEP]
    EXPECT_EQ(tok.tokenize(c.text, /*add_special=*/true, c.special), want) << "text: '" << c.text << "'";
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
  if (tok.vocab().type() == VocabType::kUgm) {
    // UGM normalizes (compatibility forms, runs of spaces), so only normalized text comes back as
    // it was; vocab_info_test compares its detokenization of other text with llama.cpp's
    for (const std::string s : {"Hello world, how are you?", "The year 1987 ended.", "x y z"}) {
      auto text = tok.detokenize(tok.tokenize(s, false, false), false, false);
      ASSERT_TRUE(text.ok()) << text.error().message;
      EXPECT_EQ(*text, s);
    }
    return;
  }
  int checked = 0;
  for (const OracleCase& c : load_reference(GetParam())) {
    if (c.special) continue;
    // a literal U+2581 comes back as a space where it stands for one in token texts
    if (tok.vocab().escape_whitespaces() && c.text.find("\xE2\x96\x81") != std::string::npos) continue;
    if (tok.vocab().clean_spaces() && testing::clean_up_applies(c.text)) continue;
    auto text = tok.detokenize(tok.tokenize(c.text, false, false), false, false);
    ASSERT_TRUE(text.ok()) << text.error().message;
    EXPECT_EQ(*text, c.text);
    ++checked;
  }
  EXPECT_GT(checked, 40);
}

// Byte strings that are not valid UTF-8 (which the JavaScript oracle cannot pass) against
// llama.cpp's tokens from tests/text/data/bytes_ref.json (make_bytes_ref.sh, through libllama).
TEST_P(OracleCases, RawBytesMatchLlamaCpp) {
  const Tokenizer& tok = fixture_tokenizer(GetParam());
  static const nlohmann::json ref =
      nlohmann::json::parse(read_file(source_path("tests/text/data/bytes_ref.json"))).at("vocabs");
  ASSERT_TRUE(ref.contains(GetParam()));
  int checked = 0;
  for (const auto& c : ref.at(GetParam())) {
    const std::string hex = c.at("hex").get<std::string>();
    std::string bytes;
    for (size_t i = 0; i + 1 < hex.size(); i += 2)
      bytes.push_back(static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16)));
    EXPECT_EQ(tok.tokenize(bytes, false, false), c.at("tokens").get<std::vector<int32_t>>())
        << "bytes " << hex;
    ++checked;
  }
  EXPECT_EQ(checked, 15);
}

TEST_P(OracleCases, InvalidUtf8GivesValidIds) {
  const Tokenizer& tok = fixture_tokenizer(GetParam());
  // truncated sequences, lone continuation bytes, bytes that never occur in UTF-8
  for (std::string s : {"\xE2\x82", "\x80\x80", "\xC0", "\xF8\x88\x80\x80\x80", "ok\xF0\x9F\x98"}) {
    const std::vector<int32_t> t = tok.tokenize(s, true, true);
    for (int32_t id : t) EXPECT_TRUE(tok.vocab().valid(id));
    EXPECT_TRUE(tok.detokenize(t, true, true).ok());
  }
}

INSTANTIATE_TEST_SUITE_P(Vocabs, OracleCases, ::testing::ValuesIn(testing::kAllVocabs),
                         testing::vocab_test_name);

}  // namespace
}  // namespace kiln::text
