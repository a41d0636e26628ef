// kiln's Jinja2-subset template engine, written for chat templates. One parse, many renders.
//
//   auto t = jinja::Template::parse(source);          // Result: syntax errors name line:column
//   auto text = t->render({.context = ctx});           // Result: runtime errors likewise
//
// The language, its whitespace rules and where it follows @huggingface/jinja rather than
// Python's Jinja2 are described in lexer.h, value.h and builtins_*.cpp. Not supported (errors
// when parsing): include/extends/block/import/with, recursive loops, `*args`/`**kwargs`.
// A Template is immutable after parse and may be rendered from several threads at once.
#pragma once

#include <memory>
#include <string>

#include "core/result.h"
#include "text/jinja/builtins.h"
#include "text/jinja/value.h"

namespace kiln::jinja {

struct Stmt;

struct RenderOptions {
  Object context;  // the template's variables (messages, bos_token...)
  Clock clock;     // time behind strftime_now(); empty: the system clock
};

class Template {
 public:
  // Errors read "jinja: line L, column C: <what>".
  static Result<Template> parse(std::string source);
  Result<std::string> render(const RenderOptions& options) const;

 private:
  struct Parsed;
  std::shared_ptr<const Parsed> parsed_;
};

}  // namespace kiln::jinja
