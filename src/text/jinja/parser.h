// Parser: tokens -> syntax tree. Every construct the engine does not implement (include,
// extends, block, with, recursive loops, argument unpacking) is an error here, naming it with
// its line and column, rather than a surprise at render time; so are unknown filters and tests,
// except where Jinja2 defers them to render time (name_check.h).
#pragma once

#include <string_view>

#include "text/jinja/ast.h"

namespace kiln::jinja {

// Throws TemplateError on a syntax error.
Body parse_template(std::string_view source);

}  // namespace kiln::jinja
