// JSON schemas built to exhaust the stack or the CPU (issue 30): each one is refused with an error
// that names the limit, or converted without recursion in bounded time, never a crash.
#include <gtest/gtest.h>

#include <chrono>
#include <nlohmann/json.hpp>
#include <string>

#include "text/grammar/gbnf.h"
#include "text/grammar/json_schema.h"

namespace kiln::grammar {
namespace {

using json = nlohmann::ordered_json;
using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// {"$ref": "#/$defs/0", "$defs": [{"$ref": "#/$defs/1"}, ..., {"type": "string"}]}, n references
// long (an array: an object of n keys costs ordered_json n^2 / 2 comparisons to build).
json ref_chain(int n) {
  json defs = json::array();
  for (int i = 0; i + 1 < n; ++i) defs.push_back({{"$ref", "#/$defs/" + std::to_string(i + 1)}});
  defs.push_back({{"type", "string"}});
  return {{"$ref", "#/$defs/0"}, {"$defs", defs}};
}

// A $ref chain 10,000 long (358 KB) crashed the server; 100,000 crashed `kiln run -jf`.
TEST(HostileSchema, RefChainsAreRefusedAtTheDepthLimit) {
  for (int n : {10'000, 100'000}) {
    auto gbnf = json_schema_to_gbnf(ref_chain(n));
    ASSERT_FALSE(gbnf.ok()) << n;
    EXPECT_NE(gbnf.error().message.find("schemas nest deeper than 128 levels"), std::string::npos) << gbnf.error().message;
  }
  // Within the limit a chain converts, and its grammar parses.
  auto gbnf = json_schema_to_gbnf(ref_chain(kMaxSchemaDepth - 1));
  ASSERT_TRUE(gbnf.ok()) << gbnf.error().message;
  EXPECT_TRUE(Grammar::parse(*gbnf).ok());
  // Nesting without $refs counts the same.
  json deep = {{"type", "string"}};
  for (int i = 0; i < kMaxSchemaDepth; ++i) deep = {{"type", "array"}, {"items", deep}};
  auto refused = json_schema_to_gbnf(deep);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.error().message.find("deeper than 128"), std::string::npos) << refused.error().message;
}

// A property name's length and the number of optional properties used to set recursion depths (the
// name's trie, the chain of optional properties): a 200,000-character name, and 20,000 optional
// properties, convert without recursion and in bounded time.
TEST(HostileSchema, LongNamesAndManyPropertiesConvertWithoutRecursion) {
  const std::string name(200'000, 'a');
  const json long_name = {{"type", "object"}, {"properties", {{name, {{"type", "integer"}}}}}, {"additionalProperties", true}};
  auto a = json_schema_to_gbnf(long_name);
  ASSERT_TRUE(a.ok()) << a.error().message;
  EXPECT_GT(a->size(), name.size() * 4);  // one alternative per character of the name
  // Its groups nest 200,000 deep: parsed without recursion, and refused by kiln's limit on rules
  // (a group is a rule) before llama.cpp's limit on the rules a repetition multiplies is reached.
  auto g = Grammar::parse(*a);
  ASSERT_FALSE(g.ok());
  EXPECT_NE(g.error().message.find("rules (kiln's limit)"), std::string::npos) << g.error().message;

  json props = json::object();
  for (int i = 0; i < 20'000; ++i) props["p" + std::to_string(i)] = {{"type", "integer"}};
  const auto start = Clock::now();
  auto b = json_schema_to_gbnf(json{{"type", "object"}, {"properties", props}});
  ASSERT_TRUE(b.ok()) << b.error().message;
  EXPECT_LT(seconds_since(start), 5.0);
  EXPECT_NE(b->find("p19998-rest ::= ( \",\" space p19999-kv )?"), std::string::npos);
}

// An enum of 200,000 strings stalled every chat for about 40 s (grammar work per token): enums
// take kMaxEnumValues values, directly or through allOf.
TEST(HostileSchema, EnumsAreBounded) {
  json values = json::array();
  for (size_t i = 0; i < kMaxEnumValues; ++i) values.push_back("v" + std::to_string(i));
  EXPECT_TRUE(json_schema_to_gbnf(json{{"enum", values}}).ok());
  values.push_back("one more");
  for (const json& schema : {json{{"enum", values}}, json{{"allOf", {json{{"enum", values}}, json{{"enum", {"v1"}}}}}}}) {
    auto g = json_schema_to_gbnf(schema);
    ASSERT_FALSE(g.ok());
    EXPECT_NE(g.error().message.find("enum has 4097 values, more than the 4096 kiln takes"), std::string::npos)
        << g.error().message;
  }
}

}  // namespace
}  // namespace kiln::grammar
