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
  std::vector<std::string> texts;
  const std::string sep = "\n__ggml_vocab_test__\n";
  for (size_t pos = 0;;) {
    const size_t hit = inp.find(sep, pos);
    if (hit == std::string::npos) break;
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
  return cases;
}

class FixtureVectors : public ::testing::TestWithParam<std::string> {};

TEST_P(FixtureVectors, TokenizeMatchesLlamaCpp) {
  const Tokenizer& tok = fixture_tokenizer(GetParam());
  const std::vector<Case> cases = load_cases(GetParam());
  ASSERT_EQ(cases.size(), 46u);
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
    const bool cleanable = c.text.find(" ?") != std::string::npos || c.text.find(" !") != std::string::npos ||
                           c.text.find(" .") != std::string::npos || c.text.find(" ,") != std::string::npos ||
                           c.text.find(" '") != std::string::npos;
    if (tok.vocab().clean_spaces() && cleanable) {
      EXPECT_NE(*text, c.text) << "clean-up should have changed '" << c.text << "'";
      continue;
    }
    EXPECT_EQ(*text, c.text) << "ids of '" << c.text << "'";
  }
}

INSTANTIATE_TEST_SUITE_P(Vocabs, FixtureVectors,
                         ::testing::Values("llama-spm", "llama-bpe", "qwen2", "gpt-2", "phi-3", "bert-bge"),
                         [](const auto& info) {
                           std::string n = info.param;
                           for (char& ch : n)
                             if (ch == '-') ch = '_';
                           return n;
                         });

}  // namespace
}  // namespace kiln::text
