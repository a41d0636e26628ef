// The building blocks of the JSON schema grammars (ref: llama.cpp common/json-schema-to-grammar.cpp):
// the primitive JSON rules, repetitions, bounded integers, and "any string but these". Internal to
// json_schema.cpp and regex_to_gbnf.cpp.
#pragma once

#include <cstdint>
#include <limits>
#include <string>
#include <string_view>
#include <vector>

namespace kiln::grammar::schema_rules {

// The whitespace rule every schema grammar has.
inline constexpr std::string_view kSpaceRule = R"(| " " | "\n"{1,2} [ \t]{0,20})";

struct Primitive {
  std::string_view name;
  std::string_view rule;
  std::vector<std::string_view> deps;
};

// A primitive rule (boolean, number, integer, value, object, array, uuid, char, string, null,
// date, time, date-time and their -string forms) by name; nullptr when there is none.
const Primitive* primitive(std::string_view name);
// Names that schema rules may not take (they get a '-' appended): root and the primitives.
bool is_reserved_name(std::string_view name);

// `item` repeated min..max times (max = INT_MAX: unbounded), `separator` between items.
std::string repetition(const std::string& item, int min_items, int max_items, const std::string& separator = "");
// An alternation of digit strings for the integers in [min, max] (INT64_MIN / INT64_MAX: open).
std::string integer_range(int64_t min_value, int64_t max_value);

}  // namespace kiln::grammar::schema_rules
