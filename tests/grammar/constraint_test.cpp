// GrammarConstraint: which tokens a grammar allows (pieces that span rules, pieces that end
// inside a UTF-8 character, token elements, end of generation), the trie walk against the
// one-token check on real vocabularies, and lazy grammars with their triggers.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "text/grammar/grammar_constraint.h"
#include "text/test_util.h"

namespace kiln::grammar {
namespace {

using text::testing::fixture_tokenizer;

std::unique_ptr<GrammarConstraint> make(const GrammarSpec& spec, std::shared_ptr<const GrammarVocab> vocab,
                                        const text::Tokenizer* tok = nullptr) {
  auto c = GrammarConstraint::create(spec, std::move(vocab), tok);
  EXPECT_TRUE(c.ok()) << (c.ok() ? "" : c.error().message);
  return c.ok() ? std::move(*c) : nullptr;
}

// The ids allowed now, by the one-token check (computed before the whole-vocabulary walk, which
// the check would otherwise read back).
std::vector<int32_t> allowed_one_by_one(GrammarConstraint& c) {
  std::vector<int32_t> ids;
  for (int32_t id = 0; id < c.vocab().n_tokens(); ++id) {
    if (c.allows(id)) ids.push_back(id);
  }
  return ids;
}

std::vector<int32_t> allowed_by_walk(GrammarConstraint& c) {
  std::vector<int32_t> ids;
  const auto& mask = c.allowed();
  for (size_t id = 0; id < mask.size(); ++id) {
    if (mask[id]) ids.push_back(static_cast<int32_t>(id));
  }
  return ids;
}

// Pieces: 0 "a", 1 "b", 2 "ab", 3 "\xE2\x82" (first two bytes of €), 4 "\xAC" (its last), 5 "€",
// 6 "" (never), 7 "\0x" (never), 8 "</s>" (end of generation), 9 "\xFF" (never UTF-8), 10 "a€b".
std::shared_ptr<const GrammarVocab> small_vocab() {
  return GrammarVocab::from_pieces({"a", "b", "ab", "\xE2\x82", "\xAC", "€", "", std::string("\0x", 2), "</s>", "\xFF", "a€b"},
                                   {8});
}

TEST(GrammarConstraint, PiecesThatSpanRulesAndUtf8) {
  auto c = make({.gbnf = "root ::= \"a\"+ (\"€\" \"b\")?", .lazy = false, .triggers = {}}, small_vocab());
  ASSERT_TRUE(c);
  EXPECT_EQ(allowed_one_by_one(*c), (std::vector<int32_t>{0, 10}));
  EXPECT_EQ(allowed_by_walk(*c), (std::vector<int32_t>{0, 10}));
  ASSERT_TRUE(c->accept(0).ok());
  // After "a": more a's, the start of €, the whole €, "a€b", and the end (the text is complete).
  EXPECT_EQ(allowed_one_by_one(*c), (std::vector<int32_t>{0, 3, 5, 8, 10}));
  EXPECT_EQ(allowed_by_walk(*c), (std::vector<int32_t>{0, 3, 5, 8, 10}));
  ASSERT_TRUE(c->accept(3).ok());  // half of €: only the byte that completes it
  EXPECT_EQ(allowed_one_by_one(*c), (std::vector<int32_t>{4}));
  EXPECT_EQ(allowed_by_walk(*c), (std::vector<int32_t>{4}));
  ASSERT_TRUE(c->accept(4).ok());
  EXPECT_EQ(allowed_one_by_one(*c), (std::vector<int32_t>{1}));
  ASSERT_TRUE(c->accept(1).ok());
  EXPECT_TRUE(c->complete());
  EXPECT_EQ(allowed_by_walk(*c), (std::vector<int32_t>{8}));
  EXPECT_TRUE(c->accept(8).ok());
}

TEST(GrammarConstraint, RefusedTokensLeaveTheStateUnchanged) {
  auto c = make({.gbnf = "root ::= \"ab\"", .lazy = false, .triggers = {}}, small_vocab());
  ASSERT_TRUE(c);
  EXPECT_FALSE(c->accept(1).ok());
  EXPECT_FALSE(c->accept(8).ok());  // end of generation before the grammar is complete
  ASSERT_TRUE(c->accept(0).ok());
  ASSERT_TRUE(c->accept(1).ok());
  EXPECT_TRUE(c->complete());
  c->reset();
  EXPECT_FALSE(c->complete());
  EXPECT_EQ(allowed_one_by_one(*c), (std::vector<int32_t>{0, 2}));
}

TEST(GrammarConstraint, TokenElements) {
  auto c = make({.gbnf = "root ::= \"a\" <[1]> !<[0]>", .lazy = false, .triggers = {}}, small_vocab());
  ASSERT_TRUE(c);
  ASSERT_TRUE(c->accept(0).ok());
  EXPECT_EQ(allowed_by_walk(*c), (std::vector<int32_t>{1}));
  ASSERT_TRUE(c->accept(1).ok());
  // Any token but 0 with complete characters (not the empty, NUL-led, invalid or half pieces).
  EXPECT_EQ(allowed_one_by_one(*c), (std::vector<int32_t>{1, 2, 5, 10}));
  EXPECT_EQ(allowed_by_walk(*c), (std::vector<int32_t>{1, 2, 5, 10}));
}

// Walks a JSON document token by token under llama.cpp's generic JSON grammar and compares the
// trie walk with the one-token check over the whole vocabulary at every step.
void check_walk_equals_checks(const std::string& vocab_name, size_t max_steps) {
  const auto& tok = fixture_tokenizer(vocab_name);
  auto vocab = GrammarVocab::build(tok);
  const std::string json_gbnf =
      "root ::= ws object\n"
      "value ::= object | array | string | number | (\"true\" | \"false\" | \"null\") ws\n"
      "object ::= \"{\" ws ( string \":\" ws value (\",\" ws string \":\" ws value)* )? \"}\" ws\n"
      "array ::= \"[\" ws ( value (\",\" ws value)* )? \"]\" ws\n"
      "string ::= \"\\\"\" ( [^\"\\\\\\x7F\\x00-\\x1F] | \"\\\\\" ([\"\\\\bfnrt] | \"u\" [0-9a-fA-F]{4}) )* \"\\\"\" ws\n"
      "number ::= (\"-\"? ([0-9] | [1-9] [0-9]{0,15})) (\".\" [0-9]+)? ([eE] [-+]? [0-9] [1-9]{0,15})? ws\n"
      "ws ::= | \" \" | \"\\n\" [ \\t]{0,20}\n";
  auto c = make({.gbnf = json_gbnf, .lazy = false, .triggers = {}}, vocab);
  ASSERT_TRUE(c);
  const std::string doc = "{\"name\": \"Zoë ☃\", \"n\": [1, -2.5e3, true], \"o\": {}}";
  const auto ids = tok.tokenize(doc, false, false);
  size_t steps = 0;
  for (int32_t id : ids) {
    if (steps++ >= max_steps) break;
    const auto one = allowed_one_by_one(*c);
    const auto walk = allowed_by_walk(*c);
    ASSERT_EQ(one, walk) << vocab_name << " step " << steps;
    ASSERT_FALSE(walk.empty());
    ASSERT_TRUE(c->allows(id)) << "token " << id << " '" << vocab->piece(id) << "' at step " << steps;
    ASSERT_TRUE(c->accept(id).ok());
  }
}

TEST(GrammarConstraint, TrieWalkEqualsOneTokenChecksLlamaSpm) { check_walk_equals_checks("llama-spm", 64); }
TEST(GrammarConstraint, TrieWalkEqualsOneTokenChecksQwen2) { check_walk_equals_checks("qwen2", 6); }

TEST(GrammarConstraint, LazyWordTriggerReplaysFromTheWord) {
  // Pieces: 0 "Sure", 1 " <to", 2 "ol>{", 3 "}", 4 "x", 5 "</s>"
  auto vocab = GrammarVocab::from_pieces({"Sure", " <to", "ol>{", "}", "x", "</s>"}, {5});
  auto c = make({.gbnf = "root ::= \"<tool>{\" \"x\"* \"}\"", .lazy = true, .triggers = {{.value = "<tool>"}}}, vocab);
  ASSERT_TRUE(c);
  EXPECT_TRUE(c->awaiting_trigger());
  EXPECT_EQ(allowed_by_walk(*c).size(), 6u);  // everything, end of generation included
  ASSERT_TRUE(c->accept(0).ok());
  ASSERT_TRUE(c->accept(1).ok());
  EXPECT_TRUE(c->awaiting_trigger());
  ASSERT_TRUE(c->accept(2).ok());  // completes "<tool>": the grammar gets "<to" + "ol>{"
  EXPECT_FALSE(c->awaiting_trigger());
  EXPECT_EQ(allowed_one_by_one(*c), (std::vector<int32_t>{3, 4}));
  ASSERT_TRUE(c->accept(4).ok());
  ASSERT_TRUE(c->accept(3).ok());
  EXPECT_TRUE(c->complete());
}

TEST(GrammarConstraint, LazyPatternTriggerStartsAtItsGroup) {
  auto vocab = GrammarVocab::from_pieces({"call", " now", ":", "{", "}", "</s>"}, {5});
  // The grammar applies from the first non-empty capture group ("{"), not from "call".
  auto c = make({.gbnf = "root ::= \"{\" \"}\"",
                 .lazy = true,
                 .triggers = {{.type = Trigger::Type::Pattern, .value = "call[^:]*:(\\{)", .token = -1}}},
                vocab);
  ASSERT_TRUE(c);
  for (int32_t id : {0, 1, 2}) ASSERT_TRUE(c->accept(id).ok());
  EXPECT_TRUE(c->awaiting_trigger());
  ASSERT_TRUE(c->accept(3).ok());
  EXPECT_FALSE(c->awaiting_trigger());
  EXPECT_EQ(allowed_by_walk(*c), (std::vector<int32_t>{4}));
}

TEST(GrammarConstraint, LazyFullPatternAndTokenTriggers) {
  auto vocab = GrammarVocab::from_pieces({"<call>", "x", "y", "</s>"}, {3});
  auto full = make({.gbnf = "root ::= \"x\" \"y\"",
                    .lazy = true,
                    .triggers = {{.type = Trigger::Type::PatternFull, .value = "(x)", .token = -1}}},
                   vocab);
  ASSERT_TRUE(full);
  ASSERT_TRUE(full->accept(1).ok());  // "x" is the whole output: triggered
  EXPECT_FALSE(full->awaiting_trigger());
  EXPECT_EQ(allowed_by_walk(*full), (std::vector<int32_t>{2}));

  auto token = make({.gbnf = "root ::= <[0]> \"y\"", .lazy = true, .triggers = {{.type = Trigger::Type::Token, .value = "", .token = 0}}},
                    vocab);
  ASSERT_TRUE(token);
  ASSERT_TRUE(token->accept(1).ok());
  EXPECT_TRUE(token->awaiting_trigger());
  ASSERT_TRUE(token->accept(0).ok());
  EXPECT_FALSE(token->awaiting_trigger());
  EXPECT_EQ(allowed_by_walk(*token), (std::vector<int32_t>{2}));
}

TEST(GrammarConstraint, CreateErrors) {
  auto vocab = small_vocab();
  auto err = [&](const GrammarSpec& spec) {
    auto c = GrammarConstraint::create(spec, vocab);
    return c.ok() ? std::string() : c.error().message;
  };
  EXPECT_EQ(err({.gbnf = "root ::= \"a\"", .lazy = true, .triggers = {}}), "grammar: a lazy grammar needs at least one trigger");
  EXPECT_EQ(err({.gbnf = "root ::= \"a\"", .lazy = true, .triggers = {{.type = Trigger::Type::Token, .value = "", .token = 99}}}),
            "grammar: trigger token 99 outside the vocabulary [0, 11)");
  EXPECT_NE(err({.gbnf = "root ::= \"a\"", .lazy = true, .triggers = {{.type = Trigger::Type::Pattern, .value = "((", .token = -1}}})
                .find("grammar: trigger pattern '((':"),
            std::string::npos);
  EXPECT_EQ(err({.gbnf = "root ::= x", .lazy = false, .triggers = {}}), "grammar: undefined rule 'x' (used in 'root')");
}

TEST(GrammarConstraint, TokenNamesResolveThroughTheTokenizer) {
  const auto& tok = fixture_tokenizer("qwen2");
  auto vocab = GrammarVocab::build(tok);
  auto c = make({.gbnf = "root ::= <|im_start|>", .lazy = false, .triggers = {}}, vocab, &tok);
  ASSERT_TRUE(c);
  const int32_t im_start = tok.tokenize("<|im_start|>", false, true).at(0);
  const auto ids = allowed_by_walk(*c);
  ASSERT_EQ(ids.size(), 1u);
  EXPECT_EQ(ids[0], im_start);
}

}  // namespace
}  // namespace kiln::grammar
