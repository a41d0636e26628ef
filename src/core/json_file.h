// Reading small JSON files (a Hugging Face folder's config.json, a safetensors header, ...).
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "core/result.h"

namespace kiln {

// The whole file's bytes; an Error naming the path when it cannot be read.
Result<std::string> read_text_file(const std::string& path);
// Parses a JSON file. Duplicate keys in the top-level object are an Error (the JSON library
// would keep the last silently).
Result<nlohmann::json> read_json_file(const std::string& path);
// Parses JSON text, with the same duplicate check; `what` names it in errors.
Result<nlohmann::json> parse_json_text(std::string_view text, const std::string& what);

// Runs `f` (which returns a Result or Status) and turns a JSON type error thrown by a typed
// accessor (value(), get<T>()) on hostile input into an Error naming `what`.
template <class F>
auto json_guard(const std::string& what, F&& f) -> decltype(f()) {
  try {
    return f();
  } catch (const nlohmann::json::exception& e) {
    return make_error(what, ": unexpected JSON value: ", e.what());
  }
}

}  // namespace kiln
