// llama.cpp's own tokenizer test vectors (tests/data/vocab/*.inp|.out, from test-tokenizer-0):
// every input must tokenize to exactly the listed ids (no special tokens added), and detokenize
// back to the input wherever llama.cpp's test expects a round trip.
#include <gtest/gtest.h>

#include <sstream>

#include "test_util.h"

namespace kiln::text {
namespace {

using testing::fixture_tokenizer;
using testing::read_file;

struct Case {
  std::string text;
  std::vector<int32_t> ids;
};

std::vector<Case> load_cases(const std::string& name) {
  const std::string base = "vocab/ggml-vocab-" + name + ".gguf";
  const std::string inp = read_file(test_data::path(base + ".inp"));
  const std::string out = read_file(test_data::path(base + ".out"));
  // ref: llama.cpp tests/test-tokenizer-0.cpp: inputs separated by the marker line; a last input
  // may end without one.
  std::vector<std::string> texts;
  const std::string sep = "\n__ggml_vocab_test__\n";
  for (size_t pos = 0; pos < inp.size();) {
    const size_t hit = inp.find(sep, pos);
    if (hit == std::string::npos) {
      texts.push_back(inp.substr(pos));
      break;
    }
    texts.push_back(inp.substr(pos, hit - pos));
    pos = hit + sep.size();
  }
  std::vector<Case> cases;
  std::istringstream lines(out);
  std::string line;
  for (const std::string& t : texts) {
    EXPECT_TRUE(std::getline(lines, line)) << name << ": fewer output lines than inputs";
    Case c{t, {}};
    std::istringstream ids(line);
    for (int32_t id; ids >> id;) c.ids.push_back(id);
    cases.push_back(std::move(c));
  }
  EXPECT_FALSE(std::getline(lines, line)) << name << ": more output lines than inputs";
  return cases;
}

class FixtureVectors : public ::testing::TestWithParam<std::string> {};

TEST_P(FixtureVectors, TokenizeMatchesLlamaCpp) {
  const Tokenizer& tok = fixture_tokenizer(GetParam());
  const std::vector<Case> cases = load_cases(GetParam());
  ASSERT_GE(cases.size(), 45u);
  for (const Case& c : cases) {
    EXPECT_EQ(tok.tokenize(c.text, /*add_special=*/false, /*parse_special=*/false), c.ids)
        << "input: '" << c.text << "'";
  }
}

TEST_P(FixtureVectors, DetokenizeRoundTrips) {
  const Tokenizer& tok = fixture_tokenizer(GetParam());
  const VocabType type = tok.vocab().type();
  for (const Case& c : load_cases(GetParam())) {
    auto text = tok.detokenize(c.ids, /*remove_special=*/false, /*unparse_special=*/false);
    ASSERT_TRUE(text.ok()) << text.error().message;
    // SPM drops the space prefix it added, BPE maps bytes back: both restore the input, except
    // where a vocabulary's clean-up rule (" ." -> ".", " 's" -> "'s", ...) applies. WPM
    // lowercases and drops spacing, so it has no round trip.
    if (type == VocabType::kWpm) continue;
    if (tok.vocab().clean_spaces() && testing::clean_up_applies(c.text)) {
      EXPECT_NE(*text, c.text) << "clean-up should have changed '" << c.text << "'";
      continue;
    }
    EXPECT_EQ(*text, c.text) << "ids of '" << c.text << "'";
  }
}

INSTANTIATE_TEST_SUITE_P(Vocabs, FixtureVectors, ::testing::ValuesIn(testing::kVocabsWithVectors),
                         testing::vocab_test_name);

}  // namespace
}  // namespace kiln::text
