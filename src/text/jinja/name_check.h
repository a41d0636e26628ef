// Jinja2's compile-time check of filter and test names: a name the engine does not know is an
// error when the template is parsed, unless it sits where Jinja2 defers the check to the moment
// it runs (inside an `if` statement, its condition or branches, or a conditional expression
// `a if b else c`, as long as no `for`, macro, call or filter block opens in between). Deferred
// names fail when evaluated ("unknown filter 'from_json'"), so a template that guards an
// unknown filter with a condition that is false renders, as it does in Jinja2.
#pragma once

#include "text/jinja/ast.h"

namespace kiln::jinja {

// Throws TemplateError at the first unknown name Jinja2 would refuse at compile time.
void check_names(const Body& body);

}  // namespace kiln::jinja
