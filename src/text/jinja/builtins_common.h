// Helpers shared by the built-in filters, tests, methods and globals (not a public interface).
#pragma once

#include <string>
#include <string_view>

#include "text/jinja/error.h"
#include "text/jinja/value.h"

namespace kiln::jinja {

// Argument `index`/`name` of a builtin `what`, checked for its type, or `fallback` if absent.
bool arg_bool(const CallArgs& args, size_t index, std::string_view name, bool fallback,
              std::string_view what);
int64_t arg_int(const CallArgs& args, size_t index, std::string_view name, int64_t fallback,
                std::string_view what);
std::string arg_string(const CallArgs& args, size_t index, std::string_view name, std::string fallback,
                       std::string_view what);
// A required argument; fails naming `what` when it is missing.
const Value& arg_required(const CallArgs& args, size_t index, std::string_view name, std::string_view what);

// Dotted attribute path ("a.b", "0") of an item, undefined where a step is missing.
Value attribute_path(const Value& item, std::string_view path);

// Python-style strip of the code points in `chars` (whitespace when chars is null).
std::string strip_chars(const std::string& s, const Value* chars, bool left, bool right);

}  // namespace kiln::jinja
