// JSON schema to GBNF, producing the grammar llama.cpp's converter produces (ref: llama.cpp
// common/json-schema.cpp and common/json-schema-to-grammar.cpp: same rules, same rule names, same
// text), so a model under the same schema writes the same JSON.
//
// Covered: type (one or a list), enum, const, properties / required / additionalProperties,
// items / prefixItems (tuples), minItems / maxItems, minLength / maxLength, pattern (anchored
// regexes: literals, classes, groups, alternation, quantifiers), format date / time / date-time /
// uuid, integer minimum / maximum / exclusiveMinimum / exclusiveMaximum, $ref into the same
// document ($defs, definitions, any JSON pointer, "#" for the whole document), anyOf, oneOf (as anyOf: the alternatives should
// not overlap), allOf of objects (their properties merged) or of enums (their intersection).
// Ignored annotations: title, description, $schema, $id, $comment, default, examples, readOnly,
// writeOnly, deprecated. Anything else (not, if/then/else, multipleOf, uniqueItems, number
// bounds, minProperties, patternProperties, a pattern with lookarounds, ...) is refused with an
// error that names the keyword and where it is, where llama.cpp would silently produce JSON the
// schema rejects.
//
// Thread-safety: SchemaConverter is a builder for one grammar; the free function is reentrant.
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "core/result.h"

namespace kiln::grammar {

// Deepest nesting of schemas the converter follows (properties, items, alternatives and $refs
// each add a level); a deeper schema is refused with an error that names the limit.
inline constexpr int kMaxSchemaDepth = 128;

// Most values an enum may have (more is refused with an error that names the limit): each is an
// alternative that the grammar's work per token goes through.
inline constexpr size_t kMaxEnumValues = 4096;

// The GBNF for a JSON schema (the root rule matches one JSON value the schema accepts).
Result<std::string> json_schema_to_gbnf(const nlohmann::ordered_json& schema);

// A GBNF string literal for `text` ("..." with \r \n " \\ escaped), as llama.cpp writes them.
std::string gbnf_literal(std::string_view text);

// Where the $refs of a schema given to SchemaConverter::add_schema resolve. Non-owning: the
// documents must outlive the converter.
struct SchemaDocuments {
  // What "#" names: null, the schema itself; a tool's parameters for the schema of one of them.
  const nlohmann::ordered_json* root = nullptr;
  // Subschemas that are documents of their own (each tool's parameters inside a schema of all the
  // calls): a $ref inside one resolves against it, as llama.cpp resolves references per tool.
  std::vector<const nlohmann::ordered_json*> embedded = {};
};

// Builds one grammar from rules and schemas (llama.cpp's build_grammar / common_grammar_builder):
// the tool-call grammars combine their own rules with the argument schemas of every tool.
class SchemaConverter {
 public:
  explicit SchemaConverter(bool dotall = false);

  // Adds `rule` under `name` (characters outside [a-zA-Z0-9-] become '-'); a different rule of
  // the same name gets a numbered name. Returns the name used.
  std::string add_rule(const std::string& name, const std::string& rule);
  // Adds the rules for a schema, its $refs resolved as `documents` says; `name` "" or "root"
  // makes it the root rule. Returns the rule name that matches it. Errors name the keyword and its
  // place in the schema.
  Result<std::string> add_schema(const std::string& name, const nlohmann::ordered_json& schema,
                                 const SchemaDocuments& documents = {});
  // The grammar text: every rule, by name.
  std::string grammar() const;

 private:
  struct Visit;  // one schema document's traversal (json_schema.cpp)

  std::string add_primitive(const std::string& name, const std::string& key);
  std::string not_strings(const std::vector<std::string>& strings);

  // A reference's rule comes from: its document and the reference.
  using RefOrigin = std::pair<const nlohmann::ordered_json*, std::string>;

  bool dotall_;
  std::map<std::string, std::string> rules_;
  std::map<RefOrigin, std::string> ref_rules_;  // each reference's rule (being made, or made)
  std::set<std::string> ref_names_;             // the names given to references' rules
};

}  // namespace kiln::grammar
