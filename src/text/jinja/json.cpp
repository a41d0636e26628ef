#include "text/jinja/json.h"

#include <algorithm>
#include <cstdio>

#include "text/jinja/error.h"
#include "text/jinja/utf8.h"

namespace kiln::jinja {

std::string json_quote(std::string_view s, bool ensure_ascii) {
  std::string out = "\"";
  size_t i = 0;
  char hex[16];
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c < 0x80) {
      switch (c) {
        case '"':
          out += "\\\"";
          break;
        case '\\':
          out += "\\\\";
          break;
        case '\b':
          out += "\\b";
          break;
        case '\f':
          out += "\\f";
          break;
        case '\n':
          out += "\\n";
          break;
        case '\r':
          out += "\\r";
          break;
        case '\t':
          out += "\\t";
          break;
        default:
          if (c < 0x20 || (c == 0x7f && ensure_ascii)) {
            std::snprintf(hex, sizeof(hex), "\\u%04x", c);
            out += hex;
          } else {
            out.push_back(static_cast<char>(c));
          }
      }
      ++i;
      continue;
    }
    // A multi-byte sequence: copied as is, or written as UTF-16 escapes.
    size_t len = (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : (c & 0xF8) == 0xF0 ? 4 : 1;
    len = std::min(len, s.size() - i);
    if (!ensure_ascii) {
      out.append(s.substr(i, len));
    } else {
      for (char32_t cp : utf8_decode(s.substr(i, len))) {
        if (cp >= 0x10000) {
          const char32_t v = cp - 0x10000;
          std::snprintf(hex, sizeof(hex), "\\u%04x\\u%04x", 0xD800 + (v >> 10), 0xDC00 + (v & 0x3FF));
        } else {
          std::snprintf(hex, sizeof(hex), "\\u%04x", static_cast<unsigned>(cp));
        }
        out += hex;
      }
    }
    i += len;
  }
  out += "\"";
  return out;
}

namespace {

// Deeper values (only a template's own loops can build them) are refused, not recursed into.
constexpr int kMaxJsonDepth = 512;

void write_json(std::string& out, const Value& v, const JsonOptions& o, int depth) {
  if (depth > kMaxJsonDepth) fail("tojson: value nested deeper than ", kMaxJsonDepth, " levels");
  // An indent of 0 writes one line, as the reference renderer does.
  const int indent = o.indent.value_or(0) > 0 ? *o.indent : 0;
  std::string item_sep = indent > 0 ? "," : ", ";
  std::string key_sep = ": ";
  if (o.separators) {
    item_sep = o.separators->first;
    key_sep = o.separators->second;
  }
  std::string pad_base, pad_child;  // newline + indentation, when indenting
  if (indent > 0) {
    pad_base.push_back('\n');
    pad_base.append(static_cast<size_t>(indent) * static_cast<size_t>(depth), ' ');
    pad_child = pad_base;
    pad_child.append(static_cast<size_t>(indent), ' ');
  }
  switch (v.kind()) {
    case Value::Kind::kUndefined:
      out += o.undefined_as_null ? "null" : "undefined";
      return;
    case Value::Kind::kNone:
      out += "null";
      return;
    case Value::Kind::kBool:
      out += v.as_bool() ? "true" : "false";
      return;
    case Value::Kind::kInt:
    case Value::Kind::kFloat:
      out += format_json_number(v);
      return;
    case Value::Kind::kString:
      out += json_quote(v.as_string(), o.ensure_ascii);
      return;
    case Value::Kind::kArray: {
      const Array& a = v.as_array();
      out += "[";
      for (size_t i = 0; i < a.size(); ++i) {
        if (i > 0) out += item_sep;
        out += pad_child;
        write_json(out, a[i], o, depth + 1);
      }
      if (!a.empty()) out += pad_base;
      out += "]";
      return;
    }
    case Value::Kind::kObject: {
      std::vector<const std::pair<std::string, Value>*> entries;
      for (const auto& e : v.as_object().entries) entries.push_back(&e);
      if (o.sort_keys) {
        std::stable_sort(entries.begin(), entries.end(),
                         [](auto* a, auto* b) { return a->first < b->first; });
      }
      out += "{";
      for (size_t i = 0; i < entries.size(); ++i) {
        if (i > 0) out += item_sep;
        out += pad_child;
        out += json_quote(entries[i]->first, o.ensure_ascii);
        out += key_sep;
        write_json(out, entries[i]->second, o, depth + 1);
      }
      if (!entries.empty()) out += pad_base;
      out += "}";
      return;
    }
    case Value::Kind::kCallable:
      fail("tojson: cannot convert a callable ('", v.as_callable().name, "') to JSON");
  }
}

template <class J>
Value from_json_impl(const J& j) {
  switch (j.type()) {
    case J::value_t::null:
      return Value(None{});
    case J::value_t::boolean:
      return Value(j.template get<bool>());
    case J::value_t::number_integer:
      return Value(j.template get<int64_t>());
    case J::value_t::number_unsigned: {
      const auto u = j.template get<uint64_t>();
      if (u > static_cast<uint64_t>(INT64_MAX)) return Value(static_cast<double>(u));
      return Value(static_cast<int64_t>(u));
    }
    case J::value_t::number_float:
      return Value(j.template get<double>());
    case J::value_t::string:
      return Value(j.template get<std::string>());
    case J::value_t::array: {
      Array a;
      a.reserve(j.size());
      for (const auto& e : j) a.push_back(from_json_impl(e));
      return Value(std::move(a));
    }
    case J::value_t::object: {
      Object o;
      for (auto it = j.begin(); it != j.end(); ++it) o.set(it.key(), from_json_impl(it.value()));
      return Value(std::move(o));
    }
    default:
      return Value();  // binary / discarded: no template meaning
  }
}

}  // namespace

std::string to_json(const Value& v, const JsonOptions& options) {
  std::string out;
  write_json(out, v, options, 0);
  return out;
}

Value from_json(const nlohmann::ordered_json& j) { return from_json_impl(j); }
Value from_json(const nlohmann::json& j) { return from_json_impl(j); }

}  // namespace kiln::jinja
