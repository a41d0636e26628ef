// JSON schema to GBNF: the grammar text equals llama.cpp's for every schema of
// data/schemas.json and data/convert_cases.json (references from data/make_schema_refs.sh),
// every such grammar parses, and what llama.cpp would silently not enforce is refused by name.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <limits>

#include "text/grammar/gbnf.h"
#include "text/grammar/grammar_matcher.h"
#include "text/grammar/json_schema.h"
#include "text/test_util.h"

namespace kiln::grammar {
namespace {

using json = nlohmann::ordered_json;
using text::testing::read_file;
using text::testing::source_path;

// Schemas whose llama.cpp grammar admits numbers it should not (minimum 100 admits 12; a negative
// maximum admits a leading zero): kiln writes its own rules there (IntegerBoundsAdmitExactlyTheRange).
const char* const kKilnFixes[] = {"integer-min", "integer-max", "integer-None--1"};

TEST(JsonSchema, GrammarTextEqualsLlamaCpp) {
  const json refs = json::parse(read_file(source_path("tests/grammar/data/schema_refs.json")));
  json cases = json::parse(read_file(source_path("tests/grammar/data/schemas.json")));
  for (const auto& c : json::parse(read_file(source_path("tests/grammar/data/convert_cases.json")))) cases.push_back(c);
  ASSERT_EQ(refs.size(), cases.size()) << "regenerate data/schema_refs.json";
  for (size_t i = 0; i < cases.size(); ++i) {
    const std::string name = cases[i]["name"];
    ASSERT_EQ(refs[i]["name"], name);
    auto gbnf = json_schema_to_gbnf(cases[i]["schema"]);
    ASSERT_TRUE(gbnf.ok()) << name << ": " << gbnf.error().message;
    const bool fixed = std::find(std::begin(kKilnFixes), std::end(kKilnFixes), name) != std::end(kKilnFixes);
    if (fixed) {
      EXPECT_NE(*gbnf, refs[i]["gbnf"].get<std::string>()) << name << ": llama.cpp's grammar is now right; drop the fix";
    } else {
      EXPECT_EQ(*gbnf, refs[i]["gbnf"].get<std::string>()) << name;
    }
    auto g = Grammar::parse(*gbnf);
    EXPECT_TRUE(g.ok()) << name << ": " << (g.ok() ? "" : g.error().message);
  }
}

// Whether `text` is a sentence of the grammar `start` is positioned at.
bool accepts(const GrammarMatcher& start, const std::string& text) {
  GrammarMatcher m = start;
  for (char c : text) {
    if (!m.accept_token(-1, std::string(1, c)).ok()) return false;
  }
  return m.complete();
}

TEST(JsonSchema, IntegerBoundsAdmitExactlyTheRange) {
  const int64_t kNone = std::numeric_limits<int64_t>::min(), kNoMax = std::numeric_limits<int64_t>::max();
  const std::pair<int64_t, int64_t> bounds[] = {
      {100, kNoMax}, {105, kNoMax}, {1000, kNoMax}, {1050, kNoMax}, {20, kNoMax}, {7, kNoMax},  {0, kNoMax},
      {-5, kNoMax},  {-120, kNoMax}, {kNone, -1},   {kNone, -5},    {kNone, -25}, {kNone, -100}, {kNone, -1050},
      {kNone, 0},    {kNone, 37},    {3, 27},       {-120, -45},    {99, 1001},   {-7, 7},       {0, 0}};
  for (const auto& [lo, hi] : bounds) {
    json schema = {{"type", "integer"}};
    if (lo != kNone) schema["minimum"] = lo;
    if (hi != kNoMax) schema["maximum"] = hi;
    auto gbnf = json_schema_to_gbnf(schema);
    ASSERT_TRUE(gbnf.ok());
    auto g = Grammar::parse(*gbnf);
    ASSERT_TRUE(g.ok());
    const GrammarMatcher start(std::make_shared<const Grammar>(std::move(*g)));
    for (int64_t v = -1100; v <= 1100; ++v) {
      EXPECT_EQ(accepts(start, std::to_string(v)), v >= lo && v <= hi) << schema.dump() << " value " << v;
    }
    for (const char* bad : {"00", "01", "-01", "007", "-0012", "1.5", "-", ""}) {
      EXPECT_FALSE(accepts(start, bad)) << schema.dump() << " accepts '" << bad << "'";
    }
  }
}

std::string refusal(const std::string& schema_text) {
  auto gbnf = json_schema_to_gbnf(json::parse(schema_text));
  EXPECT_FALSE(gbnf.ok()) << schema_text << " gave\n" << (gbnf.ok() ? *gbnf : "");
  return gbnf.ok() ? "" : gbnf.error().message;
}

TEST(JsonSchema, RefusesWhatTheGrammarWouldNotEnforce) {
  EXPECT_EQ(refusal(R"({"type": "array", "items": {"type": "integer"}, "uniqueItems": true})"),
            "json schema: keyword 'uniqueItems' is not supported (at #)");
  EXPECT_EQ(refusal(R"({"type": "number", "minimum": 0})"), "json schema: keyword 'minimum' is not supported (at #)");
  EXPECT_EQ(refusal(R"({"type": "integer", "multipleOf": 2})"), "json schema: keyword 'multipleOf' is not supported (at #)");
  EXPECT_EQ(refusal(R"({"type": "object", "properties": {"a": {"not": {"type": "null"}}}})"),
            "json schema: keyword 'not' is not supported (at #/properties/a)");
  EXPECT_EQ(refusal(R"({"type": "object", "minProperties": 1})"), "json schema: keyword 'minProperties' is not supported (at #)");
  EXPECT_EQ(refusal(R"({"if": {"type": "string"}, "then": {"maxLength": 2}})"), "json schema: keyword 'if' is not supported (at #)");
  EXPECT_EQ(refusal(R"({"$ref": "#/$defs/a", "maxLength": 3, "$defs": {"a": {"type": "string"}}})"),
            "json schema: keyword 'maxLength' next to '$ref' is not supported (at #)");
  EXPECT_EQ(refusal(R"({"type": "string", "format": "email"})"),
            "json schema: format 'email' is not supported (date, time, date-time, uuid are) (at #)");
  EXPECT_EQ(refusal(R"({"type": "string", "pattern": "^\\d+$"})"),
            "json schema: pattern '^\\d+$': the escape '\\d' is not supported (at #)");
  EXPECT_EQ(refusal(R"({"type": "string", "pattern": "^(?=a)b$"})"),
            "json schema: pattern '^(?=a)b$': lookarounds, named groups and inline flags are not supported (at #)");
  EXPECT_EQ(refusal(R"({"type": "string", "pattern": "abc"})"),
            "json schema: pattern 'abc' must be anchored with '^' and '$' (at #)");
  EXPECT_EQ(refusal(R"({"type": "object", "properties": {"a": {}}, "required": ["b"]})"),
            "json schema: required property 'b' has no schema in properties (at #)");
  EXPECT_EQ(refusal(R"({"type": "string", "enum": ["a", 1]})"),
            "json schema: value 1 does not have the schema's type \"string\" (at #)");
  EXPECT_EQ(refusal(R"({"allOf": [{"type": "string"}, {"maxLength": 3}]})"),
            "json schema: allOf: only objects (their properties are merged) or enums (intersected) can be combined (at #/allOf/0)");
  EXPECT_EQ(refusal(R"({"type": "integer", "minimum": 5, "maximum": 4})"), "json schema: no integer lies between the bounds (at #)");
  EXPECT_EQ(refusal(R"({"type": "array", "minItems": 3, "maxItems": 2})"), "json schema: maxItems is below minItems (at #)");
  EXPECT_EQ(refusal(R"({"type": "array", "minItems": -1})"), "json schema: minItems must be a non-negative integer (at #)");
  EXPECT_EQ(refusal(R"({"$ref": "https://example.com/s.json"})"),
            "json schema: $ref 'https://example.com/s.json': only references into the same document (#/...) are supported (at #)");
  EXPECT_EQ(refusal(R"({"$ref": "#/$defs/missing", "$defs": {}})"),
            "json schema: $ref '#/$defs/missing': 'missing' not found (at #)");
  EXPECT_EQ(refusal(R"({"type": "strng"})"), "json schema: unknown type 'strng' (at #)");
  EXPECT_EQ(refusal(R"({"type": "object", "properties": {"a": true}})"),
            "json schema: a schema must be an object (at #/properties/a)");
  EXPECT_EQ(refusal(R"({"nullable": true, "type": "string"})"), "json schema: keyword 'nullable' is not supported (at #)");
}

// Issue 30: "minimum": -9223372036854775808 (a valid int64) was refused as too large, and
// {"$ref": "#"} as not found though "#" is the whole document.
TEST(JsonSchema, Int64BoundsAndTheWholeDocumentRef) {
  auto plain = json_schema_to_gbnf(json::parse(R"({"type": "integer"})"));
  ASSERT_TRUE(plain.ok());
  for (const char* schema : {R"({"type": "integer", "minimum": -9223372036854775808})",
                             R"({"type": "integer", "exclusiveMinimum": -9223372036854775808})",
                             R"({"type": "integer", "maximum": 18446744073709551615})",
                             R"({"type": "integer", "minimum": -1e30, "maximum": 1e30})"}) {
    auto g = json_schema_to_gbnf(json::parse(schema));
    ASSERT_TRUE(g.ok()) << schema << ": " << g.error().message;
    EXPECT_EQ(*g, *plain) << schema;
  }
  EXPECT_EQ(refusal(R"({"type": "integer", "minimum": 18446744073709551615})"),
            "json schema: minimum is too large (at #)");
  EXPECT_EQ(refusal(R"({"type": "integer", "maximum": -9223372036854775808})"),
            "json schema: maximum is too large (at #)");

  // A tree: each node's children are the document again.
  auto tree = json_schema_to_gbnf(json::parse(
      R"({"type": "object", "properties": {"v": {"type": "integer"}, "kids": {"type": "array", "items": {"$ref": "#"}}},
          "required": ["v"], "additionalProperties": false})"));
  ASSERT_TRUE(tree.ok()) << tree.error().message;
  auto g = Grammar::parse(*tree);
  ASSERT_TRUE(g.ok()) << g.error().message << "\n" << *tree;
  const GrammarMatcher start(std::make_shared<const Grammar>(std::move(*g)));
  EXPECT_TRUE(accepts(start, R"({"v": 1, "kids": [{"v": 2}, {"v": 3, "kids": [{"v": 4}]}]})")) << *tree;
  EXPECT_FALSE(accepts(start, R"({"v": 1, "kids": [{"w": 2}]})")) << *tree;
}

TEST(JsonSchema, IgnoresAnnotationsAndKeywordsOfOtherTypes) {
  auto a = json_schema_to_gbnf(json::parse(
      R"({"type": "integer", "title": "t", "description": "d", "default": 1, "examples": [1], "$comment": "c", "maxLength": 3})"));
  auto b = json_schema_to_gbnf(json::parse(R"({"type": "integer"})"));
  ASSERT_TRUE(a.ok()) << a.error().message;
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(*a, *b);
}

}  // namespace
}  // namespace kiln::grammar
