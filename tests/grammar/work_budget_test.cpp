// The grammar engine's work per token is bounded (issue 30: `root ::= "a"?` repeated 5,000 times
// cost 38 s a token and stalled every other request): a grammar past the budget fails quickly
// with a message that names the limit, a raised interrupt flag stops the work, and the grammars
// people write stay far under it.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <nlohmann/json.hpp>
#include <string>

#include "text/grammar/grammar_constraint.h"
#include "text/grammar/json_schema.h"
#include "text/test_util.h"

namespace kiln::grammar {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

std::string optionals(int n) {
  std::string text = "root ::=";
  for (int i = 0; i < n; ++i) text += " \"a\"?";
  return text + "\n";
}

GrammarSpec spec(std::string gbnf) {
  GrammarSpec s;
  s.gbnf = std::move(gbnf);
  return s;
}

std::shared_ptr<const GrammarVocab> a_vocab() {
  return GrammarVocab::from_pieces({"a", "aa", "aaa", "b", "</s>"}, {4});
}

TEST(GrammarWorkBudget, FiveThousandOptionalsRunOutQuickly) {
  auto c = GrammarConstraint::create(spec(optionals(5000)), a_vocab());
  ASSERT_TRUE(c.ok()) << c.error().message;  // the start fits the budget; the first token does not
  const auto start = Clock::now();
  (*c)->allowed();
  EXPECT_LT(seconds_since(start), 5.0);  // 38 s before the budget (a unit is about a nanosecond)
  ASSERT_TRUE((*c)->failed());
  EXPECT_FALSE((*c)->interrupted());
  EXPECT_NE((*c)->failure().find("units of grammar work"), std::string::npos) << (*c)->failure();
  EXPECT_FALSE((*c)->allows(0));
  const Status accepted = (*c)->accept(0);
  ASSERT_FALSE(accepted.ok());
  EXPECT_EQ(accepted.error().message, (*c)->failure());
  // A new reply starts with a fresh budget.
  (*c)->reset();
  EXPECT_FALSE((*c)->failed());
}

TEST(GrammarWorkBudget, TooCostlyStartIsRefusedAtCreate) {
  auto c = GrammarConstraint::create(spec(optionals(50000)), a_vocab());
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.error().message.find("units of grammar work"), std::string::npos) << c.error().message;
}

TEST(GrammarWorkBudget, InterruptStopsTheWork) {
  auto c = GrammarConstraint::create(spec(optionals(5000)), a_vocab());
  ASSERT_TRUE(c.ok()) << c.error().message;
  std::atomic<bool> stop{true};
  (*c)->set_interrupt(&stop);
  const auto start = Clock::now();
  (*c)->allowed();
  EXPECT_LT(seconds_since(start), 0.5);
  EXPECT_TRUE((*c)->failed());
  EXPECT_TRUE((*c)->interrupted());
  EXPECT_NE((*c)->failure().find("interrupted"), std::string::npos);
  // The flag stays with the constraint across reset().
  (*c)->reset();
  (*c)->allowed();
  EXPECT_TRUE((*c)->interrupted());
}

// A JSON schema with many optional properties, walked over a document token by token on a real
// vocabulary: every token's checks cost under 10% of the budget.
TEST(GrammarWorkBudget, JsonSchemaTokensStayFarUnderTheBudget) {
  nlohmann::ordered_json props = nlohmann::ordered_json::object();
  for (int i = 0; i < 200; ++i) props["field_" + std::to_string(i)] = {{"type", i % 2 ? "string" : "number"}};
  const nlohmann::ordered_json schema = {{"type", "object"}, {"properties", props}};
  auto gbnf = json_schema_to_gbnf(schema);
  ASSERT_TRUE(gbnf.ok()) << gbnf.error().message;
  // SPM's tokens start the text with a space: the schema's root after an optional one.
  const size_t root = gbnf->find("root ::=");
  ASSERT_TRUE(root == 0 || (root != std::string::npos && (*gbnf)[root - 1] == '\n')) << *gbnf;
  gbnf->replace(root, 4, "schema-root");
  *gbnf = "root ::= \" \"? schema-root\n" + *gbnf;
  for (const char* name : {"llama-spm", "qwen2"}) {
    const auto& tok = text::testing::fixture_tokenizer(name);
    const auto vocab = GrammarVocab::build(tok);
    auto c = GrammarConstraint::create(spec(*gbnf), vocab, &tok);
    ASSERT_TRUE(c.ok()) << c.error().message;
    const std::string doc = "{\"field_7\": \"Zoë ☃\", \"field_150\": -2.5e3, \"field_199\": \"x\"}";
    uint64_t most = 0;
    for (int32_t id : tok.tokenize(doc, false, false)) {
      (*c)->allowed();
      most = std::max(most, (*c)->work_used());
      ASSERT_TRUE((*c)->allows(id)) << name << ": '" << vocab->piece(id) << "'";
      ASSERT_TRUE((*c)->accept(id).ok());
    }
    EXPECT_LT(most, WorkBudget::kDefaultLimit / 10) << name;  // 27 million on qwen2, 4.7 on llama-spm
  }
}

}  // namespace
}  // namespace kiln::grammar
