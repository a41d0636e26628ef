// GBNF grammars built to exhaust the stack or the CPU (issue 30): long chains of rules, deep
// groups and shared prefixes are parsed and checked without recursion, in bounded time.
#include <gtest/gtest.h>

#include <chrono>
#include <string>

#include "text/grammar/gbnf.h"

namespace kiln::grammar {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// "root ::= r0", "r<i> ::= r<i+1>" for i < n - 1, and the last rule `last`.
std::string rule_chain(int n, const std::string& last) {
  std::string text = "root ::= r0\n";
  for (int i = 0; i + 1 < n; ++i) text += "r" + std::to_string(i) + " ::= r" + std::to_string(i + 1) + "\n";
  return text + "r" + std::to_string(n - 1) + " ::= " + last + "\n";
}

// 100,000 rules chained r_i ::= r_{i+1} (1.9 MB) crashed the recursive left-recursion check.
TEST(HostileGbnf, LongRuleChainsAreCheckedWithoutRecursion) {
  const std::string chain = rule_chain(100'000, "\"x\"");
  ASSERT_GT(chain.size(), 1'700'000u);
  auto g = Grammar::parse(chain);
  ASSERT_TRUE(g.ok()) << g.error().message;
  EXPECT_EQ(g->n_rules(), 100'001u);
  // Closed into a loop, the chain is refused as left recursion.
  auto loop = Grammar::parse(rule_chain(100'000, "r0"));
  ASSERT_FALSE(loop.ok());
  EXPECT_NE(loop.error().message.find("left recursion"), std::string::npos) << loop.error().message;
}

// Groups nested 100,000 deep parse without recursion.
TEST(HostileGbnf, DeepGroupsParseWithoutRecursion) {
  const int n = 100'000;
  auto g = Grammar::parse("root ::= " + std::string(n, '(') + "\"a\"" + std::string(n, ')') + "\n");
  ASSERT_TRUE(g.ok()) << g.error().message;
  EXPECT_EQ(g->n_rules(), static_cast<uint32_t>(n) + 1);
  auto unclosed = Grammar::parse("root ::= " + std::string(n, '(') + "\"a\"\n");
  ASSERT_FALSE(unclosed.ok());
  EXPECT_NE(unclosed.error().message.find("expecting ')'"), std::string::npos) << unclosed.error().message;
}

// Each rule starting both its alternatives with the next one made the left-recursion check visit
// the last rule 2^n times; a rule explored once is not explored again.
TEST(HostileGbnf, SharedPrefixesAreCheckedOnce) {
  std::string text = "root ::= r0\n";
  for (int i = 0; i < 64; ++i) text += "r" + std::to_string(i) + " ::= r" + std::to_string(i + 1) + " | r" + std::to_string(i + 1) + " \"b\"\n";
  text += "r64 ::= \"a\"\n";
  const auto start = Clock::now();
  auto g = Grammar::parse(text);
  ASSERT_TRUE(g.ok()) << g.error().message;
  EXPECT_LT(seconds_since(start), 1.0);
}

// What a grammar expands to is bounded: each case is refused before it is built, with an error
// that names the limit it passed.
TEST(HostileGbnf, ExpansionsPastKilnsLimitsAreRefusedByName) {
  const std::string literal(100'000, 'x');
  std::string many_alternatives = "root ::= \"a\"";
  for (int i = 0; i < 70'000; ++i) many_alternatives += " | \"a\"";
  const std::string long_name(2'000, 'n');
  const std::string groups(10'000, '(');
  const struct {
    const char* what;
    std::string text;
    const char* limit;
  } cases[] = {
      // 2,000 copies of a 100 KB literal: 200 million elements.
      {"a long literal repeated", "root ::= \"" + literal + "\"{2000}\n", "elements (kiln's limit"},
      // Optional copies go into generated rules, 2,000 of 10,000 elements each.
      {"optional copies", "root ::= \"" + literal.substr(0, 10'000) + "\"{0,2000}\n", "elements (kiln's limit"},
      {"too many rules", rule_chain(270'000, "\"x\""), "rules (kiln's limit)"},
      {"too many alternatives", many_alternatives + "\n", "alternatives (kiln's limit)"},
      // Every group makes a rule named after the 2,000-byte name: 20 MB of names.
      {"long names copied", long_name + " ::= " + groups + "\"a\"" + std::string(groups.size(), ')') + "\nroot ::= " +
                                long_name + "\n",
       "names take more than"},
  };
  for (const auto& c : cases) {
    const auto start = Clock::now();
    auto g = Grammar::parse(c.text);
    ASSERT_FALSE(g.ok()) << c.what;
    EXPECT_NE(g.error().message.find(c.limit), std::string::npos) << c.what << ": " << g.error().message;
    EXPECT_LT(seconds_since(start), 2.0) << c.what;
  }
  // Within the limits, the largest repetition llama.cpp takes is built.
  auto digits = Grammar::parse("root ::= [0-9]{2000}\n");
  ASSERT_TRUE(digits.ok()) << digits.error().message;
}

}  // namespace
}  // namespace kiln::grammar
