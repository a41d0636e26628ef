// Every pre-tokenizer kiln knows, against llama.cpp: the GPT-2 vocabulary under each
// tokenizer.ggml.pre name tokenizes tests/text/data/pre_cases.json exactly as llama.cpp does
// (references in pre_ref.json, made by tests/text/data/make_pre_ref.sh). Tokens depend on the
// word splits, so this checks each pre-tokenizer's regexes. Plus unit checks of the regex engine.
#include "text/pretokenizer.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "test_util.h"
#include "text/regex.h"
#include "text/unicode.h"

namespace kiln::text {
namespace {

using testing::read_file;
using testing::source_path;

TEST(PreTokenizers, MatchLlamaCpp) {
  auto file = GgufFile::open(test_data::path("vocab/ggml-vocab-gpt-2.gguf"));
  ASSERT_TRUE(file.ok()) << file.error().message;
  const auto cases =
      nlohmann::json::parse(read_file(source_path("tests/text/data/pre_cases.json"))).at("cases");
  const auto ref = nlohmann::json::parse(read_file(source_path("tests/text/data/pre_ref.json"))).at("tokens");
  ASSERT_GE(ref.size(), 30u);
  for (auto it = ref.begin(); it != ref.end(); ++it) {
    const std::string pre = it.key();
    auto tok = Tokenizer::from_gguf(**file, {.pre = pre});
    ASSERT_TRUE(tok.ok()) << pre << ": " << tok.error().message;
    ASSERT_EQ(it.value().size(), cases.size());
    for (size_t i = 0; i < cases.size(); ++i) {
      const auto text = cases[i].at("text").get<std::string>();
      std::vector<int32_t> ids;
      if (tok->add_bos()) ids.push_back(tok->bos());
      const auto body = tok->tokenize(text, false, false);
      ids.insert(ids.end(), body.begin(), body.end());
      EXPECT_EQ(ids, it.value()[i].get<std::vector<int32_t>>())
          << "pre '" << pre << "', text: '" << text << "'";
    }
  }
}

TEST(PreTokenizers, UnknownNameIsAnError) {
  auto file = GgufFile::open(test_data::path("vocab/ggml-vocab-gpt-2.gguf"));
  ASSERT_TRUE(file.ok());
  auto tok = Tokenizer::from_gguf(**file, {.pre = "no-such-pre"});
  ASSERT_FALSE(tok.ok());
  EXPECT_NE(tok.error().message.find("'no-such-pre'"), std::string::npos) << tok.error().message;
}

std::vector<size_t> split(const std::string& pattern, const std::string& text) {
  auto pre = PreTokenizer::create({pattern});
  KILN_ASSERT(pre.ok(), pre.ok() ? "" : pre.error().message);
  return pre->split_lengths(decode_utf8(text));
}

TEST(Regex, EcmaScriptSemantics) {
  // gaps between matches become words too
  EXPECT_EQ(split("[0-9]+", "ab12cd345"), (std::vector<size_t>{2, 2, 2, 3}));
  // the first alternative that matches wins, not the longest
  EXPECT_EQ(split("a|ab", "ab"), (std::vector<size_t>{1, 1}));
  // greedy quantifiers give back for the rest of the pattern; bounded repeats
  EXPECT_EQ(split("\\s+(?!\\S)", "a   b"), (std::vector<size_t>{1, 2, 2}));
  EXPECT_EQ(split("[0-9]{1,3}", "1234567"), (std::vector<size_t>{3, 3, 1}));
  // lookahead, groups, lazy repeats, anchors, word boundaries
  EXPECT_EQ(split("x(?=y)", "xyxz"), (std::vector<size_t>{1, 3}));
  EXPECT_EQ(split("(?:ab)+", "ababa"), (std::vector<size_t>{4, 1}));
  EXPECT_EQ(split("a+?", "aaa"), (std::vector<size_t>{1, 1, 1}));
  EXPECT_EQ(split("\\s+$", "a  b  "), (std::vector<size_t>{4, 2}));
  EXPECT_EQ(split("\\b", "ab cd"), (std::vector<size_t>{2, 1, 2}));
  // empty matches split without consuming (as std::regex_iterator)
  EXPECT_EQ(split("(?=(\\d{3})+(?!\\d))", "1234567"), (std::vector<size_t>{1, 3, 3}));
}

TEST(Regex, CategoriesUseLlamaCppCollapsedSymbols) {
  // \p{L} matches letters of any script, \p{N} digits of any script
  EXPECT_EQ(split("\\p{L}+", "abc ДЖЗ 中文"), (std::vector<size_t>{3, 1, 3, 1, 2}));
  EXPECT_EQ(split("\\p{N}+", "x١٢٣y"), (std::vector<size_t>{1, 3, 1}));
  // the ASCII members of \p{S} and \p{P} are listed explicitly, as llama.cpp lists them
  auto re = Regex::compile("\\p{S}");
  ASSERT_TRUE(re.ok());
  EXPECT_TRUE(re->uses_categories());
  const std::vector<uint32_t> tilde{'~'}, plus{'+'}, bang{'!'}, math{kCollapsedSymbol};
  EXPECT_TRUE(re->search(tilde, 0).has_value());
  EXPECT_TRUE(re->search(plus, 0).has_value());
  EXPECT_TRUE(re->search(math, 0).has_value());
  EXPECT_FALSE(re->search(bang, 0).has_value());
  EXPECT_EQ(split("\\p{S}+", "a∑∫b"), (std::vector<size_t>{1, 2, 1}));
}

TEST(Regex, BadPatternsAreErrors) {
  for (const char* bad : {"(", "a)", "[abc", "*a", "a{2,1}", "(?i:a)", "\\p{Xyz}", "[z-a]", "\\q"}) {
    auto re = Regex::compile(bad);
    EXPECT_FALSE(re.ok()) << bad;
    if (!re.ok()) {
      EXPECT_NE(re.error().message.find("regex:"), std::string::npos);
    }
  }
}

TEST(Regex, LongInputsStayLinear) {
  // one-symbol repeats run without recursion: a 200k-letter word is one match
  const std::string word(200000, 'a');
  EXPECT_EQ(split(" ?\\p{L}+| ?\\p{N}+", word), (std::vector<size_t>{200000}));
}

}  // namespace
}  // namespace kiln::text
