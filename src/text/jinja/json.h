// JSON text of template values, as the `tojson` filter writes it, and template values made from
// nlohmann::json (the render context).
// ref: @huggingface/jinja toJSON (itself modelled on Python's json.dumps): separators ", " and
// ": " without indent, "," and ": " with indent; strings as JSON.stringify escapes them
// (non-ASCII kept unless ensure_ascii, which writes \uXXXX per UTF-16 unit).
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "text/jinja/value.h"

namespace kiln::jinja {

struct JsonOptions {
  std::optional<int> indent;  // none: one line
  bool ensure_ascii = false;
  bool sort_keys = false;
  std::optional<std::pair<std::string, std::string>> separators;  // (item, key) separators
  bool undefined_as_null = true;  // false: "undefined" (how arrays print with `{{ }}`)
};

// Throws TemplateError for a callable (no JSON form).
std::string to_json(const Value& v, const JsonOptions& options);
// A JSON string literal for s (with quotes).
std::string json_quote(std::string_view s, bool ensure_ascii);
// Template value of a JSON document: objects keep their key order, integers stay integers.
Value from_json(const nlohmann::ordered_json& j);
Value from_json(const nlohmann::json& j);

}  // namespace kiln::jinja
