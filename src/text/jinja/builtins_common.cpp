#include "text/jinja/builtins_common.h"

#include "text/jinja/utf8.h"

namespace kiln::jinja {

bool arg_bool(const CallArgs& args, size_t index, std::string_view name, bool fallback,
              std::string_view what) {
  const Value* v = args.get(index, name);
  if (!v || v->is_undefined() || v->is_none()) return fallback;
  if (v->is_bool()) return v->as_bool();
  if (v->is_int()) return v->as_int() != 0;
  fail(what, ": argument '", name, "' must be a boolean, got ", v->type_name());
}

int64_t arg_int(const CallArgs& args, size_t index, std::string_view name, int64_t fallback,
                std::string_view what) {
  const Value* v = args.get(index, name);
  if (!v || v->is_undefined() || v->is_none()) return fallback;
  if (v->is_int()) return v->as_int();
  if (v->is_bool()) return v->as_bool();
  fail(what, ": argument '", name, "' must be an integer, got ", v->type_name());
}

std::string arg_string(const CallArgs& args, size_t index, std::string_view name, std::string fallback,
                       std::string_view what) {
  const Value* v = args.get(index, name);
  if (!v || v->is_undefined() || v->is_none()) return fallback;
  if (v->is_string()) return v->as_string();
  fail(what, ": argument '", name, "' must be a string, got ", v->type_name());
}

const Value& arg_required(const CallArgs& args, size_t index, std::string_view name, std::string_view what) {
  const Value* v = args.get(index, name);
  if (!v) fail(what, ": missing argument '", name, "'");
  return *v;
}

Value attribute_path(const Value& item, std::string_view path) {
  Value cur = item;
  size_t start = 0;
  while (start <= path.size()) {
    const size_t dot = path.find('.', start);
    const std::string_view part =
        path.substr(start, dot == std::string_view::npos ? std::string_view::npos : dot - start);
    if (cur.is_object()) {
      const Value* v = cur.as_object().find(part);
      if (!v) return Value();
      cur = *v;
    } else if (cur.is_array()) {
      size_t idx = 0;
      bool digits = !part.empty();
      for (char c : part) {
        digits = digits && c >= '0' && c <= '9';
        if (digits) idx = idx * 10 + static_cast<size_t>(c - '0');
      }
      if (!digits || idx >= cur.as_array().size()) return Value();
      cur = cur.as_array()[idx];
    } else {
      return Value();
    }
    if (dot == std::string_view::npos) break;
    start = dot + 1;
  }
  return cur;
}

namespace {

bool is_unicode_space(char32_t c) {
  return c == ' ' || (c >= 0x09 && c <= 0x0d) || c == 0x1c || c == 0x1d || c == 0x1e || c == 0x1f ||
         c == 0x85 || c == 0xa0 || c == 0x1680 || (c >= 0x2000 && c <= 0x200a) || c == 0x2028 ||
         c == 0x2029 || c == 0x202f || c == 0x205f || c == 0x3000 || c == 0xfeff;
}

}  // namespace

std::string strip_chars(const std::string& s, const Value* chars, bool left, bool right) {
  const std::u32string u = utf8_decode(s);
  std::u32string set;
  const bool whitespace = !chars || chars->is_none() || chars->is_undefined();
  if (!whitespace) {
    if (!chars->is_string()) fail("strip: chars must be a string, got ", chars->type_name());
    set = utf8_decode(chars->as_string());
  }
  auto strip_it = [&](char32_t c) {
    return whitespace ? is_unicode_space(c) : set.find(c) != std::u32string::npos;
  };
  size_t b = 0, e = u.size();
  if (left) {
    while (b < e && strip_it(u[b])) ++b;
  }
  if (right) {
    while (e > b && strip_it(u[e - 1])) --e;
  }
  return utf8_encode(u.substr(b, e - b));
}

}  // namespace kiln::jinja
