// The GBNF parser (syntax, errors with line and column, llama.cpp's limits) and the matcher's
// acceptance of text (sentences, prefixes, UTF-8, repetitions).
#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "text/grammar/gbnf.h"
#include "text/grammar/grammar_matcher.h"

namespace kiln::grammar {
namespace {

std::string parse_error(const std::string& text) {
  auto g = Grammar::parse(text);
  EXPECT_FALSE(g.ok()) << "parsed: " << text;
  return g.ok() ? "" : g.error().message;
}

// Feeds `text` one byte at a time (so multi-byte characters arrive split, as token pieces may
// split them). Returns: -1 when some byte is refused, 1 when the whole text is a sentence, 0 when
// it is only a viable prefix.
int run(const std::string& gbnf, const std::string& text) {
  auto g = Grammar::parse(gbnf);
  EXPECT_TRUE(g.ok()) << (g.ok() ? "" : g.error().message);
  if (!g.ok()) return -2;
  GrammarMatcher m(std::make_shared<const Grammar>(std::move(*g)));
  for (char c : text) {
    if (!m.accept_token(-1, std::string(1, c)).ok()) return -1;
  }
  return m.complete() && m.partial().n_remain == 0 ? 1 : 0;
}

TEST(GbnfParse, ErrorsNameLineAndColumn) {
  EXPECT_EQ(parse_error("root ::= \"a\"\nfoo = \"b\""), "grammar: line 2, column 5: expecting ::=");
  EXPECT_EQ(parse_error("root ::= \"a\\q\""), "grammar: line 1, column 12: unknown escape");
  EXPECT_EQ(parse_error("root ::= \"abc"), "grammar: line 1, column 14: unexpected end of input in a string literal");
  EXPECT_EQ(parse_error("root ::= [a-"), "grammar: line 1, column 13: unexpected end of input in a character class");
  EXPECT_EQ(parse_error("root ::= ( \"a\" \n"), "grammar: line 2, column 1: expecting ')' to close the '(' at line 1, column 10");
  EXPECT_EQ(parse_error("root ::= * \"a\""), "grammar: line 1, column 10: expecting an item before the repetition operator");
  EXPECT_EQ(parse_error("root ::= \"a\"{3,1}"), "grammar: line 1, column 13: repetition maximum is below its minimum");
  EXPECT_EQ(parse_error("root ::= \"a\"{2001}"), "grammar: line 1, column 13: repetition count 2001 exceeds 2000");
  EXPECT_EQ(parse_error("root ::= \"a\"{x}"), "grammar: line 1, column 14: expecting an integer");
  EXPECT_EQ(parse_error("root ::= \"a\" ) \"b\""), "grammar: line 1, column 14: unexpected ')' (expecting the end of the rule)");
  EXPECT_EQ(parse_error("root ::= <x>"), "grammar: line 1, column 10: no vocabulary to resolve the token");
  EXPECT_EQ(parse_error("root ::= [\\x4]"), "grammar: line 1, column 13: expecting 2 hex chars");
}

TEST(GbnfParse, SemanticErrors) {
  EXPECT_EQ(parse_error("root ::= item"), "grammar: undefined rule 'item' (used in 'root')");
  EXPECT_EQ(parse_error("start ::= \"a\""), "grammar: no 'root' rule");
  EXPECT_EQ(parse_error(""), "grammar: no rules");
  EXPECT_EQ(parse_error("root ::= root \"a\" | \"b\""), "grammar: left recursion in rule 'root' (unsupported)");
  // Left recursion through a rule that may be empty.
  EXPECT_EQ(parse_error("root ::= e root \"a\" | \"b\"\ne ::= \"\" | \"x\""), "grammar: left recursion in rule 'root' (unsupported)");
  // Repetitions that would expand into more than 2000 rules.
  EXPECT_EQ(parse_error("root ::= (\"a\"{0,1000}){3}"),
            "grammar: line 1, column 23: repetitions multiplied by the rules they repeat exceed 2000");
}

TEST(GbnfParse, SyntaxAccepted) {
  const char* ok[] = {
      "root ::= \"a\"  # comment\n",
      "root ::= \"a\" | \"b\"\r\n",
      "root ::= (\n  \"a\"\n  | \"b\"\n)\n\n# trailing comment",
      "root ::= [^\"\\\\] [\\x00-\\x1F] [\\u00e9] [\\U0001F600] . x\nx ::= \"\"",
      "root ::= <[42]> !<[7]>",
      "root ::= \"a\"{2} \"b\"{1,} \"c\"{0,3} \"d\"{ 1 , 2 } \"e\"?",
  };
  for (const char* text : ok) {
    auto g = Grammar::parse(text);
    EXPECT_TRUE(g.ok()) << text << ": " << (g.ok() ? "" : g.error().message);
  }
}

TEST(GbnfParse, PrintsRulesWithGeneratedOnes) {
  auto g = Grammar::parse("root ::= \"ab\" [a-c]* item\nitem ::= [^x] | \"y\"");
  ASSERT_TRUE(g.ok());
  EXPECT_EQ(g->to_string(),
            "root ::= [a] [b] root_1 item \n"
            "root_1 ::= [a-c] root_1 | \n"
            "item ::= [^x] | [y] \n");
}

TEST(GbnfMatch, LiteralsAlternativesGroups) {
  const std::string g = "root ::= \"cat\" | \"dog\" (\"s\" | \"gy\")?";
  EXPECT_EQ(run(g, "cat"), 1);
  EXPECT_EQ(run(g, "dog"), 1);
  EXPECT_EQ(run(g, "dogs"), 1);
  EXPECT_EQ(run(g, "doggy"), 1);
  EXPECT_EQ(run(g, "dogg"), 0);
  EXPECT_EQ(run(g, "ca"), 0);
  EXPECT_EQ(run(g, "cats"), -1);
  EXPECT_EQ(run(g, "cow"), -1);
}

TEST(GbnfMatch, CharacterClasses) {
  const std::string g = "root ::= [a-cx] [^0-9\\n] .";
  EXPECT_EQ(run(g, "bz!"), 1);
  EXPECT_EQ(run(g, "x\t\n"), 1);  // `.` takes a newline too
  EXPECT_EQ(run(g, "d"), -1);
  EXPECT_EQ(run(g, "a5"), -1);
  EXPECT_EQ(run(g, "a\n"), -1);
}

TEST(GbnfMatch, Repetitions) {
  const std::string g = "root ::= \"a\"{2,3} \"b\"+ \"c\"* \"d\"?";
  EXPECT_EQ(run(g, "aab"), 1);
  EXPECT_EQ(run(g, "aaabbbcccd"), 1);
  EXPECT_EQ(run(g, "ab"), -1);
  EXPECT_EQ(run(g, "aaaab"), -1);
  EXPECT_EQ(run(g, "aabdd"), -1);
  EXPECT_EQ(run(g, "aa"), 0);
  EXPECT_EQ(run("root ::= \"x\"{3}", "xxx"), 1);
  EXPECT_EQ(run("root ::= \"x\"{3}", "xxxx"), -1);
  EXPECT_EQ(run("root ::= \"x\"{0} \"y\"", "y"), 1);
  // A maximum over 2000 means unbounded, as in llama.cpp.
  EXPECT_EQ(run("root ::= \"x\"{1,5000}", std::string(3000, 'x')), 1);
}

TEST(GbnfMatch, RecursionAndEmptyAlternatives) {
  const std::string g = "root ::= list\nlist ::= \"[\" (item (\",\" item)*)? \"]\"\nitem ::= [0-9]+ | list";
  EXPECT_EQ(run(g, "[]"), 1);
  EXPECT_EQ(run(g, "[1,[2,[]],34]"), 1);
  EXPECT_EQ(run(g, "[1,]"), -1);
  EXPECT_EQ(run(g, "[[[["), 0);
}

TEST(GbnfMatch, Utf8SplitAcrossPieces) {
  const std::string g = "root ::= \"é\" [€-€] [\\U0001F600-\\U0001F64F]";
  EXPECT_EQ(run(g, "é€😀"), 1);
  EXPECT_EQ(run(g, "é€\xF0\x9F"), 0);      // an incomplete emoji is still a viable prefix
  EXPECT_EQ(run(g, "e"), -1);
  EXPECT_EQ(run(g, "é€\xF0\x9F\x99\x90"), -1);  // U+1F650 is past the range
}

}  // namespace
}  // namespace kiln::grammar
