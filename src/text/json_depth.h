// The nesting bound for JSON that arrives as text (a request body, a JSON string inside one).
// Everything that walks a parsed value (dumps, template values, the Jinja renderer) recurses once
// per level, so text that nests deeper than kMaxJsonDepth is refused before it is parsed instead
// of overflowing the stack (nlohmann's parser and destructor do not recurse). Pure; thread-safe.
#pragma once

#include <string_view>

namespace kiln::text {

// Deepest nesting of arrays and objects accepted from untrusted JSON text.
inline constexpr int kMaxJsonDepth = 512;

// True when arrays and objects in `text` nest deeper than `limit` (strings are skipped; the text
// need not be valid JSON). One pass, no recursion.
bool json_nests_deeper_than(std::string_view text, int limit);

}  // namespace kiln::text
