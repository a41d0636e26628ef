// Lexer: template source -> tokens, with the reference renderer's whitespace rules.
// ref: @huggingface/jinja (the renderer the fixtures come from): one trailing newline of the
// source is dropped; lstrip_blocks (spaces and tabs before `{%`/`{#` at the start of a line are
// removed) and trim_blocks (the newline right after `%}`/`#}` is removed) are on; `{%-`/`{{-`/
// `{#-` strip the whitespace before the tag and `-%}`/`-}}`/`-#}` the whitespace after it;
// `{% generation %}`/`{% endgeneration %}` tags are removed. `{% raw %}...{% endraw %}` keeps its
// content as text (Jinja2 semantics; the reference renderer lacks raw blocks).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "text/jinja/error.h"

namespace kiln::jinja {

enum class TokenKind {
  kText,       // literal template text
  kOpenStmt,   // {%
  kCloseStmt,  // %}
  kOpenExpr,   // {{
  kCloseExpr,  // }}
  kName,       // identifier or keyword
  kInt,
  kFloat,
  kString,  // text holds the unescaped value
  kOp,      // ( ) [ ] { } , . : | = == != < > <= >= + - ~ * / // % **
  kEnd,     // end of the source
};

struct Token {
  TokenKind kind;
  std::string text;
  Location where;
};

// Throws TemplateError (with a location) on malformed input: unclosed tags, comments or strings,
// bad escapes, unexpected characters.
std::vector<Token> tokenize(std::string_view source);

}  // namespace kiln::jinja
