#include "text/jinja/value.h"

#include <charconv>
#include <cmath>
#include <cstdio>

#include "text/jinja/error.h"
#include "text/jinja/json.h"

namespace kiln::jinja {

const Value* Object::find(std::string_view key) const {
  for (const auto& [k, v] : entries) {
    if (k == key) return &v;
  }
  return nullptr;
}

Value* Object::find(std::string_view key) {
  for (auto& [k, v] : entries) {
    if (k == key) return &v;
  }
  return nullptr;
}

void Object::set(std::string key, Value value) {
  if (Value* slot = find(key)) {
    *slot = std::move(value);
  } else {
    entries.emplace_back(std::move(key), std::move(value));
  }
}

const Value* CallArgs::get(size_t index, std::string_view name) const {
  if (index < positional.size()) return &positional[index];
  for (const auto& [k, v] : keyword) {
    if (k == name) return &v;
  }
  return nullptr;
}

void CallArgs::expect_at_most(std::string_view what, size_t max_positional,
                              std::initializer_list<std::string_view> names) const {
  if (positional.size() > max_positional) {
    fail(what, " takes at most ", max_positional, " positional argument(s), got ", positional.size());
  }
  for (const auto& [k, v] : keyword) {
    bool known = false;
    for (std::string_view n : names) known = known || n == k;
    if (!known) fail(what, " got an unexpected keyword argument '", k, "'");
  }
}

double Value::as_number() const {
  switch (kind()) {
    case Kind::kInt:
      return static_cast<double>(as_int());
    case Kind::kFloat:
      return as_float();
    case Kind::kBool:
      return as_bool() ? 1.0 : 0.0;
    default:
      fail("expected a number, got ", type_name());
  }
}

bool Value::truthy() const {
  switch (kind()) {
    case Kind::kUndefined:
    case Kind::kNone:
      return false;
    case Kind::kBool:
      return as_bool();
    case Kind::kInt:
      return as_int() != 0;
    case Kind::kFloat:
      return as_float() != 0.0;
    case Kind::kString:
      return !as_string().empty();
    case Kind::kArray:
      return !as_array().empty();
    case Kind::kObject:
      return !as_object().entries.empty();
    case Kind::kCallable:
      return true;
  }
  return false;
}

std::string_view Value::type_name() const {
  switch (kind()) {
    case Kind::kUndefined:
      return "undefined";
    case Kind::kNone:
      return "none";
    case Kind::kBool:
      return "boolean";
    case Kind::kInt:
      return "integer";
    case Kind::kFloat:
      return "float";
    case Kind::kString:
      return "string";
    case Kind::kArray:
      return "array";
    case Kind::kObject:
      return as_object().is_namespace ? "namespace" : "object";
    case Kind::kCallable:
      return "callable";
  }
  return "?";
}

namespace {

// JavaScript's Number::toString (ECMA-262 §6.1.6.1.20) from the shortest round-trip digits.
std::string js_number_string(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v < 0 ? "-Infinity" : "Infinity";
  if (v == 0) return "0";
  char buf[64];
  auto r = std::to_chars(buf, buf + sizeof(buf), v, std::chars_format::scientific);
  std::string sci(buf, r.ptr);  // "-1.2345e+02"
  std::string sign;
  if (sci[0] == '-') {
    sign = "-";
    sci.erase(0, 1);
  }
  const size_t e_pos = sci.find('e');
  std::string digits;
  for (size_t i = 0; i < e_pos; ++i) {
    if (sci[i] != '.') digits.push_back(sci[i]);
  }
  const int k = static_cast<int>(digits.size());
  const int n = std::stoi(sci.substr(e_pos + 1)) + 1;  // v = 0.digits * 10^n
  std::string out;
  if (k <= n && n <= 21) {
    out = digits + std::string(n - k, '0');
  } else if (0 < n && n <= 21) {
    out = digits.substr(0, n) + "." + digits.substr(n);
  } else if (-6 < n && n <= 0) {
    out = "0." + std::string(-n, '0') + digits;
  } else {
    const int e = n - 1;
    out = digits.substr(0, 1);
    if (k > 1) out += "." + digits.substr(1);
    out += e < 0 ? "e-" : "e+";
    out += std::to_string(e < 0 ? -e : e);
  }
  return sign + out;
}

}  // namespace

std::string format_float(double v) {
  if (v == 0 && std::signbit(v)) return "-0.0";
  if (std::isfinite(v) && v == std::floor(v) && std::fabs(v) < 1e21) return js_number_string(v) + ".0";
  return js_number_string(v);
}

std::string format_json_number(const Value& v) {
  if (v.is_int()) return std::to_string(v.as_int());
  if (!std::isfinite(v.as_float())) return "null";  // JSON.stringify writes null for NaN/Infinity
  return js_number_string(v.as_float());
}

Value deep_copy(const Value& v) {
  if (v.is_array()) {
    Array a;
    a.reserve(v.as_array().size());
    for (const Value& x : v.as_array()) a.push_back(deep_copy(x));
    return Value(std::move(a));
  }
  if (v.is_object()) {
    Object o;
    o.is_namespace = v.as_object().is_namespace;
    for (const auto& [k, x] : v.as_object().entries) o.entries.emplace_back(k, deep_copy(x));
    return Value(std::move(o));
  }
  return v;
}

std::string to_string(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::kUndefined:
      return "";
    case Value::Kind::kNone:
      return "None";
    case Value::Kind::kBool:
      return v.as_bool() ? "true" : "false";
    case Value::Kind::kInt:
      return std::to_string(v.as_int());
    case Value::Kind::kFloat:
      return format_float(v.as_float());
    case Value::Kind::kString:
      return v.as_string();
    case Value::Kind::kArray:
    case Value::Kind::kObject: {
      JsonOptions o;
      o.undefined_as_null = false;
      return to_json(v, o);
    }
    case Value::Kind::kCallable:
      return "<function " + v.as_callable().name + ">";
  }
  return "";
}

std::string to_concat_string(const Value& v) {
  if (v.is_float()) return format_json_number(v);
  if (v.is_array()) {
    std::string out;
    for (size_t i = 0; i < v.as_array().size(); ++i) {
      if (i > 0) out += ",";
      out += to_string(v.as_array()[i]);
    }
    return out;
  }
  return to_string(v);
}

std::string to_output(const Value& v) {
  if (v.is_none()) return "";
  return to_string(v);
}

bool values_equal(const Value& a, const Value& b) {
  const bool a_num = a.is_number() || a.is_bool();
  const bool b_num = b.is_number() || b.is_bool();
  if (a_num && b_num) {
    if (a.is_bool() && b.is_bool()) return a.as_bool() == b.as_bool();
    if ((a.is_int() || a.is_bool()) && (b.is_int() || b.is_bool())) {
      const int64_t x = a.is_bool() ? a.as_bool() : a.as_int();
      const int64_t y = b.is_bool() ? b.as_bool() : b.as_int();
      return x == y;
    }
    return a.as_number() == b.as_number();
  }
  if (a.kind() != b.kind()) return false;
  switch (a.kind()) {
    case Value::Kind::kUndefined:
    case Value::Kind::kNone:
      return true;
    case Value::Kind::kString:
      return a.as_string() == b.as_string();
    case Value::Kind::kArray: {
      const Array& x = a.as_array();
      const Array& y = b.as_array();
      if (x.size() != y.size()) return false;
      for (size_t i = 0; i < x.size(); ++i) {
        if (!values_equal(x[i], y[i])) return false;
      }
      return true;
    }
    case Value::Kind::kObject: {
      const Object& x = a.as_object();
      const Object& y = b.as_object();
      if (x.entries.size() != y.entries.size()) return false;
      for (const auto& [k, v] : x.entries) {
        const Value* w = y.find(k);
        if (!w || !values_equal(v, *w)) return false;
      }
      return true;
    }
    case Value::Kind::kCallable:
      return &a.as_callable() == &b.as_callable();
    default:
      return false;
  }
}

namespace {

std::string ascii_lower(std::string s) {
  for (char& c : s) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return s;
}

}  // namespace

int compare_values(const Value& a, const Value& b, bool case_sensitive) {
  const bool a_num = a.is_number() || a.is_bool();
  const bool b_num = b.is_number() || b.is_bool();
  if (a_num && b_num) {
    if ((a.is_int() || a.is_bool()) && (b.is_int() || b.is_bool())) {
      const int64_t x = a.is_bool() ? a.as_bool() : a.as_int();
      const int64_t y = b.is_bool() ? b.as_bool() : b.as_int();
      return x < y ? -1 : x > y ? 1 : 0;
    }
    const double x = a.as_number(), y = b.as_number();
    return x < y ? -1 : x > y ? 1 : 0;
  }
  if (a.is_string() && b.is_string()) {
    const int c = case_sensitive ? a.as_string().compare(b.as_string())
                                 : ascii_lower(a.as_string()).compare(ascii_lower(b.as_string()));
    return c < 0 ? -1 : c > 0 ? 1 : 0;
  }
  if (a.is_array() && b.is_array()) {  // Python orders sequences element by element
    const Array& x = a.as_array();
    const Array& y = b.as_array();
    for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
      const int c = compare_values(x[i], y[i], case_sensitive);
      if (c != 0) return c;
    }
    return x.size() < y.size() ? -1 : x.size() > y.size() ? 1 : 0;
  }
  if ((a.is_none() && b.is_none()) || (a.is_undefined() && b.is_undefined())) return 0;
  fail("cannot compare ", a.type_name(), " with ", b.type_name());
}

}  // namespace kiln::jinja
