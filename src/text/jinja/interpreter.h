// Evaluator: runs a parsed template over a context and returns the text it renders.
// Scoping: a for loop opens a scope (its `set`s stay inside), if blocks do not (as in the
// reference renderer and Jinja2); a macro runs in a scope below the one it was defined in
// (Jinja2's lexical rule; the reference renderer uses the caller's scope instead).
#pragma once

#include <memory>
#include <string>

#include "text/jinja/ast.h"
#include "text/jinja/value.h"

namespace kiln::jinja {

// Renders `body` with the variables of `globals` (context and built-in globals). Throws
// TemplateError (located where known) on a runtime error, including raise_exception().
std::string render_body(const Body& body, const Object& globals);

}  // namespace kiln::jinja
