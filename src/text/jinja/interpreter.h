// Evaluator: runs a parsed template over a context and returns the text it renders.
// Scoping follows the reference renderer: a for loop opens a scope (its `set`s stay inside),
// if blocks do not; a macro runs in a scope below the one it was defined in.
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
