// Methods of strings, arrays and objects (`s.strip()`, `d.items()`, `l.append(x)`), with
// Python's semantics, and the `length` property the reference renderer gives strings and arrays.
#include <algorithm>

#include "text/jinja/builtins.h"
#include "text/jinja/builtins_common.h"
#include "text/jinja/utf8.h"

namespace kiln::jinja {

namespace {

using Method = Value (*)(const Value& self, const CallArgs& args);

bool is_space_byte(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}

// Python str.split: on whitespace runs (dropping empty parts) when sep is none.
Value s_split(const Value& self, const CallArgs& args) {
  args.expect_at_most("str.split", 2, {"sep", "maxsplit"});
  const std::string& s = self.as_string();
  const Value* sep_v = args.get(0, "sep");
  const int64_t maxsplit = arg_int(args, 1, "maxsplit", -1, "str.split");
  Array out;
  if (!sep_v || sep_v->is_none()) {
    size_t i = 0;
    while (true) {
      while (i < s.size() && is_space_byte(s[i])) ++i;
      if (i >= s.size()) break;
      if (maxsplit >= 0 && static_cast<int64_t>(out.size()) >= maxsplit) {
        size_t end = s.size();
        while (end > i && is_space_byte(s[end - 1])) --end;
        out.emplace_back(s.substr(i, end - i));
        break;
      }
      const size_t start = i;
      while (i < s.size() && !is_space_byte(s[i])) ++i;
      out.emplace_back(s.substr(start, i - start));
    }
    return Value(std::move(out));
  }
  if (!sep_v->is_string()) fail("str.split: sep must be a string, got ", sep_v->type_name());
  const std::string& sep = sep_v->as_string();
  if (sep.empty()) fail("str.split: empty separator");
  size_t pos = 0;
  while (true) {
    const size_t hit =
        (maxsplit < 0 || static_cast<int64_t>(out.size()) < maxsplit) ? s.find(sep, pos) : std::string::npos;
    if (hit == std::string::npos) break;
    out.emplace_back(s.substr(pos, hit - pos));
    pos = hit + sep.size();
  }
  out.emplace_back(s.substr(pos));
  return Value(std::move(out));
}

Value s_strip(const Value& self, const CallArgs& args) {
  return Value(strip_chars(self.as_string(), args.get(0, "chars"), true, true));
}
Value s_lstrip(const Value& self, const CallArgs& args) {
  return Value(strip_chars(self.as_string(), args.get(0, "chars"), true, false));
}
Value s_rstrip(const Value& self, const CallArgs& args) {
  return Value(strip_chars(self.as_string(), args.get(0, "chars"), false, true));
}

// startswith/endswith with a string or a tuple (array) of strings.
Value affix_test(const Value& self, const CallArgs& args, bool prefix) {
  const std::string_view what = prefix ? "str.startswith" : "str.endswith";
  const Value& arg = arg_required(args, 0, prefix ? "prefix" : "suffix", what);
  const std::string& s = self.as_string();
  auto check = [&](const Value& v) {
    if (!v.is_string()) fail(what, ": argument must be a string or a tuple of strings, got ", v.type_name());
    const std::string& a = v.as_string();
    return prefix ? s.starts_with(a) : s.ends_with(a);
  };
  if (arg.is_array()) {
    for (const Value& v : arg.as_array()) {
      if (check(v)) return Value(true);
    }
    return Value(false);
  }
  return Value(check(arg));
}
Value s_startswith(const Value& self, const CallArgs& args) { return affix_test(self, args, true); }
Value s_endswith(const Value& self, const CallArgs& args) { return affix_test(self, args, false); }

Value s_upper(const Value& self, const CallArgs&) { return apply_filter("upper", self, {}); }
Value s_lower(const Value& self, const CallArgs&) { return apply_filter("lower", self, {}); }
Value s_title(const Value& self, const CallArgs&) { return apply_filter("title", self, {}); }
Value s_capitalize(const Value& self, const CallArgs&) { return apply_filter("capitalize", self, {}); }
Value s_replace(const Value& self, const CallArgs& args) { return apply_filter("replace", self, args); }

// Code-point index of byte offset `byte` in s.
int64_t cp_index(const std::string& s, size_t byte) {
  return static_cast<int64_t>(utf8_length(std::string_view(s).substr(0, byte)));
}

Value s_find(const Value& self, const CallArgs& args) {
  const std::string sub = arg_string(args, 0, "sub", "", "str.find");
  const size_t hit = self.as_string().find(sub);
  return Value(hit == std::string::npos ? int64_t{-1} : cp_index(self.as_string(), hit));
}
Value s_rfind(const Value& self, const CallArgs& args) {
  const std::string sub = arg_string(args, 0, "sub", "", "str.rfind");
  const size_t hit = self.as_string().rfind(sub);
  return Value(hit == std::string::npos ? int64_t{-1} : cp_index(self.as_string(), hit));
}

Value s_count(const Value& self, const CallArgs& args) {
  const std::string sub = arg_string(args, 0, "sub", "", "str.count");
  const std::string& s = self.as_string();
  if (sub.empty()) return Value(static_cast<int64_t>(utf8_length(s) + 1));
  int64_t n = 0;
  for (size_t pos = s.find(sub); pos != std::string::npos; pos = s.find(sub, pos + sub.size())) ++n;
  return Value(n);
}

Value s_join(const Value& self, const CallArgs& args) {
  const Value& items = arg_required(args, 0, "iterable", "str.join");
  CallArgs join_args;
  join_args.positional.push_back(self);
  return apply_filter("join", items, join_args);
}

// Python str.format with `{}`, `{0}`, `{name}` fields and `{{`/`}}` (no format specs).
Value s_format(const Value& self, const CallArgs& args) {
  const std::string& f = self.as_string();
  std::string out;
  size_t auto_index = 0;
  for (size_t i = 0; i < f.size(); ++i) {
    const char c = f[i];
    if (c == '}') {
      if (i + 1 < f.size() && f[i + 1] == '}') ++i;
      out.push_back('}');
      continue;
    }
    if (c != '{') {
      out.push_back(c);
      continue;
    }
    if (i + 1 < f.size() && f[i + 1] == '{') {
      out.push_back('{');
      ++i;
      continue;
    }
    const size_t close = f.find('}', i);
    if (close == std::string::npos) fail("str.format: unmatched '{' in the format string");
    const std::string field = f.substr(i + 1, close - i - 1);
    if (field.find_first_of(":!") != std::string::npos)
      fail("str.format: format specs are not supported ('{", field, "}')");
    const Value* v = nullptr;
    if (field.empty()) {
      v = auto_index < args.positional.size() ? &args.positional[auto_index] : nullptr;
      ++auto_index;
    } else if (std::all_of(field.begin(), field.end(), [](char d) { return d >= '0' && d <= '9'; })) {
      const size_t idx = std::stoul(field);
      v = idx < args.positional.size() ? &args.positional[idx] : nullptr;
    } else {
      v = args.get(SIZE_MAX, field);
    }
    if (!v) fail("str.format: no argument for field '{", field, "}'");
    out += to_string(*v);
    i = close;
  }
  return Value(std::move(out));
}

template <bool (*Pred)(char32_t)>
Value s_is(const Value& self, const CallArgs&) {
  const std::u32string u = utf8_decode(self.as_string());
  if (u.empty()) return Value(false);
  for (char32_t c : u) {
    if (!Pred(c)) return Value(false);
  }
  return Value(true);
}
bool p_digit(char32_t c) { return c >= '0' && c <= '9'; }
bool p_alpha(char32_t c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c >= 0x80; }
bool p_alnum(char32_t c) { return p_digit(c) || p_alpha(c); }
bool p_space(char32_t c) { return c == ' ' || (c >= 0x09 && c <= 0x0d); }

Value s_splitlines(const Value& self, const CallArgs&) {
  Array out;
  const std::string& s = self.as_string();
  size_t start = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\n' || s[i] == '\r') {
      out.emplace_back(s.substr(start, i - start));
      if (s[i] == '\r' && i + 1 < s.size() && s[i + 1] == '\n') ++i;
      start = i + 1;
    }
  }
  if (start < s.size()) out.emplace_back(s.substr(start));
  return Value(std::move(out));
}

Value l_append(const Value& self, const CallArgs& args) {
  self.as_array().push_back(arg_required(args, 0, "item", "list.append"));
  return Value(None{});
}
Value l_extend(const Value& self, const CallArgs& args) {
  const Value& other = arg_required(args, 0, "iterable", "list.extend");
  if (!other.is_array()) fail("list.extend: needs an array, got ", other.type_name());
  const Array copy = other.as_array();
  self.as_array().insert(self.as_array().end(), copy.begin(), copy.end());
  return Value(None{});
}
Value l_insert(const Value& self, const CallArgs& args) {
  Array& a = self.as_array();
  int64_t i = arg_int(args, 0, "index", 0, "list.insert");
  const int64_t n = static_cast<int64_t>(a.size());
  if (i < 0) i = std::max<int64_t>(0, i + n);
  i = std::min(i, n);
  a.insert(a.begin() + i, arg_required(args, 1, "item", "list.insert"));
  return Value(None{});
}
Value l_pop(const Value& self, const CallArgs& args) {
  Array& a = self.as_array();
  if (a.empty()) fail("list.pop: pop from an empty list");
  int64_t i = arg_int(args, 0, "index", -1, "list.pop");
  const int64_t n = static_cast<int64_t>(a.size());
  if (i < 0) i += n;
  if (i < 0 || i >= n) fail("list.pop: index ", i, " out of range for a list of ", n);
  Value v = a[static_cast<size_t>(i)];
  a.erase(a.begin() + i);
  return v;
}
Value l_index(const Value& self, const CallArgs& args) {
  const Value& x = arg_required(args, 0, "value", "list.index");
  const Array& a = self.as_array();
  for (size_t i = 0; i < a.size(); ++i) {
    if (values_equal(a[i], x)) return Value(static_cast<int64_t>(i));
  }
  fail("list.index: ", to_string(x), " is not in the list");
}
Value l_count(const Value& self, const CallArgs& args) {
  const Value& x = arg_required(args, 0, "value", "list.count");
  int64_t n = 0;
  for (const Value& v : self.as_array()) n += values_equal(v, x);
  return Value(n);
}

Value o_items(const Value& self, const CallArgs&) { return apply_filter("items", self, {}); }
Value o_keys(const Value& self, const CallArgs&) {
  Array out;
  for (const auto& [k, v] : self.as_object().entries) out.emplace_back(k);
  return Value(std::move(out));
}
Value o_values(const Value& self, const CallArgs&) {
  Array out;
  for (const auto& [k, v] : self.as_object().entries) out.push_back(v);
  return Value(std::move(out));
}
Value o_get(const Value& self, const CallArgs& args) {
  const Value& key = arg_required(args, 0, "key", "dict.get");
  const Value* fallback = args.get(1, "default");
  if (key.is_string()) {
    if (const Value* v = self.as_object().find(key.as_string())) return *v;
  }
  return fallback ? *fallback : Value(None{});
}
Value o_pop(const Value& self, const CallArgs& args) {
  const std::string key = to_string(arg_required(args, 0, "key", "dict.pop"));
  auto& entries = self.as_object().entries;
  for (auto it = entries.begin(); it != entries.end(); ++it) {
    if (it->first == key) {
      Value v = it->second;
      entries.erase(it);
      return v;
    }
  }
  if (const Value* fallback = args.get(1, "default")) return *fallback;
  fail("dict.pop: no key '", key, "'");
}
Value o_update(const Value& self, const CallArgs& args) {
  if (const Value* other = args.get(0, "other")) {
    if (!other->is_object()) fail("dict.update: needs an object, got ", other->type_name());
    const Object copy = other->as_object();
    for (const auto& [k, v] : copy.entries) self.as_object().set(k, v);
  }
  for (const auto& [k, v] : args.keyword) {
    if (k != "other") self.as_object().set(k, v);
  }
  return Value(None{});
}

struct MethodEntry {
  Value::Kind kind;
  std::string_view name;
  Method fn;
};

constexpr MethodEntry kMethods[] = {
    {Value::Kind::kString, "split", s_split},
    {Value::Kind::kString, "strip", s_strip},
    {Value::Kind::kString, "lstrip", s_lstrip},
    {Value::Kind::kString, "rstrip", s_rstrip},
    {Value::Kind::kString, "startswith", s_startswith},
    {Value::Kind::kString, "endswith", s_endswith},
    {Value::Kind::kString, "upper", s_upper},
    {Value::Kind::kString, "lower", s_lower},
    {Value::Kind::kString, "title", s_title},
    {Value::Kind::kString, "capitalize", s_capitalize},
    {Value::Kind::kString, "replace", s_replace},
    {Value::Kind::kString, "find", s_find},
    {Value::Kind::kString, "rfind", s_rfind},
    {Value::Kind::kString, "count", s_count},
    {Value::Kind::kString, "join", s_join},
    {Value::Kind::kString, "format", s_format},
    {Value::Kind::kString, "splitlines", s_splitlines},
    {Value::Kind::kString, "isdigit", s_is<p_digit>},
    {Value::Kind::kString, "isalpha", s_is<p_alpha>},
    {Value::Kind::kString, "isalnum", s_is<p_alnum>},
    {Value::Kind::kString, "isspace", s_is<p_space>},
    {Value::Kind::kArray, "append", l_append},
    {Value::Kind::kArray, "extend", l_extend},
    {Value::Kind::kArray, "insert", l_insert},
    {Value::Kind::kArray, "pop", l_pop},
    {Value::Kind::kArray, "index", l_index},
    {Value::Kind::kArray, "count", l_count},
    {Value::Kind::kObject, "items", o_items},
    {Value::Kind::kObject, "keys", o_keys},
    {Value::Kind::kObject, "values", o_values},
    {Value::Kind::kObject, "get", o_get},
    {Value::Kind::kObject, "pop", o_pop},
    {Value::Kind::kObject, "update", o_update},
};

}  // namespace

Value member_of(const Value& receiver, std::string_view name) {
  if (name == "length" && (receiver.is_string() || receiver.is_array())) {
    return apply_filter("length", receiver, {});
  }
  if (receiver.is_object() && receiver.as_object().is_namespace) return Value();
  for (const MethodEntry& m : kMethods) {
    if (m.kind == receiver.kind() && m.name == name) {
      const Method fn = m.fn;
      return Value::callable(std::string(name),
                             [receiver, fn](const CallArgs& args) { return fn(receiver, args); });
    }
  }
  return Value();
}

}  // namespace kiln::jinja
