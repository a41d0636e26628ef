// A JSON schema string `pattern` as a GBNF rule (used by json_schema.cpp).
#pragma once

#include <string>
#include <string_view>

#include "core/result.h"
#include "text/grammar/json_schema.h"

namespace kiln::grammar {

// Adds the rules for a JSON string matching `pattern` (which must be anchored, ^...$) to
// `converter` under `name`; returns the rule name. `dotall`: `.` also matches newlines. Errors
// name what the pattern uses that GBNF cannot express.
Result<std::string> pattern_to_gbnf(SchemaConverter& converter, std::string_view pattern, const std::string& name,
                                    bool dotall);

}  // namespace kiln::grammar
