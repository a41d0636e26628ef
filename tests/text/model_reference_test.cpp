// The prompts of fixtures/reference/*.json (llama.cpp's outputs for the random-weight models in
// fixtures/models, which carry real vocabularies): tokens with BOS as llama.cpp adds it, and the
// text of the greedy tokens (random tokens: a good detokenization test), which the oracle makes
// with detokenize(ids, remove_special = false, unparse_special = false). The oracle's text went
// through a JavaScript string, which turned invalid UTF-8 into U+FFFD: the test does the same to
// kiln's bytes before comparing.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "test_util.h"

namespace kiln::text {
namespace {

using testing::read_file;

// Decodes bytes as the WHATWG UTF-8 decoder does (what JavaScript strings hold): each maximal
// invalid subsequence becomes one U+FFFD.
std::string as_javascript_string(const std::string& s) {
  std::string out;
  size_t i = 0;
  while (i < s.size()) {
    const uint8_t b = static_cast<uint8_t>(s[i]);
    if (b < 0x80) {
      out.push_back(static_cast<char>(b));
      ++i;
      continue;
    }
    int need = 0;
    uint8_t lower = 0x80, upper = 0xBF;
    if (b >= 0xC2 && b <= 0xDF)
      need = 1;
    else if (b >= 0xE0 && b <= 0xEF)
      need = 2, lower = b == 0xE0 ? 0xA0 : 0x80, upper = b == 0xED ? 0x9F : 0xBF;
    else if (b >= 0xF0 && b <= 0xF4)
      need = 3, lower = b == 0xF0 ? 0x90 : 0x80, upper = b == 0xF4 ? 0x8F : 0xBF;
    size_t j = i + 1;
    int got = 0;
    while (need > 0 && got < need && j < s.size() && static_cast<uint8_t>(s[j]) >= lower &&
           static_cast<uint8_t>(s[j]) <= upper) {
      lower = 0x80, upper = 0xBF;
      ++j, ++got;
    }
    if (need > 0 && got == need) {
      out.append(s, i, j - i);
    } else {
      out += "\xEF\xBF\xBD";
    }
    i = j;
  }
  return out;
}

class ModelReference : public ::testing::TestWithParam<std::string> {};

TEST_P(ModelReference, TokensAndGreedyTextMatchLlamaCpp) {
  auto file = GgufFile::open(test_data::path("models/" + GetParam() + ".gguf"));
  ASSERT_TRUE(file.ok()) << file.error().message;
  auto tok = Tokenizer::from_gguf(**file);
  ASSERT_TRUE(tok.ok()) << tok.error().message;
  const auto ref =
      nlohmann::json::parse(read_file(test_data::path("reference/" + GetParam() + ".json")));
  ASSERT_FALSE(ref.at("cases").empty());
  for (const auto& c : ref.at("cases")) {
    const auto text = c.at("text").get<std::string>();
    const bool add_bos = c.at("add_bos").get<bool>();
    EXPECT_EQ(add_bos, tok->add_bos());
    std::vector<int32_t> ids;
    if (add_bos) ids.push_back(tok->bos());
    const auto body = tok->tokenize(text, false, c.at("special").get<bool>());
    ids.insert(ids.end(), body.begin(), body.end());
    EXPECT_EQ(ids, c.at("tokens").get<std::vector<int32_t>>()) << text;
    if (add_bos) {
      EXPECT_EQ(tok->tokenize(text, true, c.at("special").get<bool>()), ids);
    }

    const auto greedy = c.at("greedy").get<std::vector<int32_t>>();
    auto out = tok->detokenize(greedy, false, false);
    ASSERT_TRUE(out.ok()) << out.error().message;
    EXPECT_EQ(as_javascript_string(*out), c.at("greedy_text").get<std::string>());
  }
}

INSTANTIATE_TEST_SUITE_P(Models, ModelReference,
                         ::testing::Values("llama-spm-e128-f32", "llama-spm-e256-Q4_0", "qwen2-e64-Q8_0",
                                           "qwen3-e64-Q8_0"),
                         [](const auto& info) {
                           std::string n = info.param;
                           for (char& ch : n)
                             if (ch == '-') ch = '_';
                           return n;
                         });

}  // namespace
}  // namespace kiln::text
