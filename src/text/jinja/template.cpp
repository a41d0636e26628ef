#include "text/jinja/template.h"

#include "text/jinja/interpreter.h"
#include "text/jinja/parser.h"

namespace kiln::jinja {

struct Template::Parsed {
  std::string source;
  Body body;
};

namespace {

Error to_error(const TemplateError& e) {
  if (e.where().line == 0) return make_error("jinja: ", e.message());
  return make_error("jinja: line ", e.where().line, ", column ", e.where().column, ": ", e.message());
}

}  // namespace

Result<Template> Template::parse(std::string source) {
  auto parsed = std::make_shared<Parsed>();
  parsed->source = std::move(source);
  try {
    parsed->body = parse_template(parsed->source);
  } catch (const TemplateError& e) {
    return to_error(e);
  }
  Template t;
  t.parsed_ = std::move(parsed);
  return t;
}

Result<std::string> Template::render(const RenderOptions& options) const {
  Object globals;
  add_globals(globals, options.clock);
  // A private copy: templates may mutate what they are given (list.append), and renders of one
  // context may run at once.
  for (const auto& [k, v] : options.context.entries) globals.set(k, deep_copy(v));
  try {
    return render_body(parsed_->body, globals);
  } catch (const TemplateError& e) {
    return to_error(e);
  }
}

}  // namespace kiln::jinja
