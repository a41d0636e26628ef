// Template errors. Inside the engine an error is thrown as TemplateError and travels up to the
// public boundary (jinja::Template::parse/render), which turns it into a kiln::Error; nothing
// escapes that boundary. Rendering a chat template is not a hot path.
#pragma once

#include <exception>
#include <string>

#include "core/check.h"

namespace kiln::jinja {

// A position in the template source, 1-based; line 0 means "not known yet".
struct Location {
  int line = 0;
  int column = 0;
};

class TemplateError : public std::exception {
 public:
  TemplateError(std::string message, Location where) : message_(std::move(message)), where_(where) {}
  const char* what() const noexcept override { return message_.c_str(); }
  const std::string& message() const { return message_; }
  Location where() const { return where_; }
  // Attaches a location to an error raised where none was known (inside a filter, a method...).
  void locate(Location where) {
    if (where_.line == 0) where_ = where;
  }

 private:
  std::string message_;
  Location where_;
};

// Throws a TemplateError made of pieces, like kiln::make_error.
template <class... Args>
[[noreturn]] void fail_at(Location where, Args&&... args) {
  std::string s;
  (s.append(to_message_piece(std::forward<Args>(args))), ...);
  throw TemplateError(std::move(s), where);
}

template <class... Args>
[[noreturn]] void fail(Args&&... args) {
  fail_at(Location{}, std::forward<Args>(args)...);
}

}  // namespace kiln::jinja
