// GBNF and regex pieces for chat grammars: "any text that does not contain S" as rules, and a
// string escaped for an ECMAScript regex.
#pragma once

#include <string>
#include <string_view>

#include "text/grammar/json_schema.h"

namespace kiln::chat {

// Adds rules matching any text that does not contain `stop` (a text may end with a proper prefix
// of it) and returns the entry rule's name. The rules are a string-matching automaton over
// `stop`'s code points (a state per matched prefix), named `name`-0 ... `name`-N.
std::string until_rule(grammar::SchemaConverter& converter, const std::string& name, std::string_view stop);

// `text` with the ECMAScript regex metacharacters escaped.
std::string regex_escape(std::string_view text);

}  // namespace kiln::chat
