// Filters. Where @huggingface/jinja (the reference renderer) and Python's Jinja2 differ, the
// reference renderer's result is kept (title/capitalize leave other letters as they are;
// `string` of true is "true"); filters the reference lacks follow Jinja2.
#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <map>
#include <optional>

#include "text/jinja/builtins.h"
#include "text/jinja/builtins_common.h"
#include "text/jinja/json.h"
#include "text/jinja/utf8.h"

namespace kiln::jinja {

namespace {

using FilterFn = Value (*)(const Value& operand, const CallArgs& args);

bool is_word_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

// Text filters take any value by its text, as Jinja2 does (undefined is "").
std::string text_of(const Value& v) { return to_string(v); }

// A sequence for filters that accept arrays, strings (their characters) and objects (keys).
Array as_sequence(const Value& v, std::string_view filter) {
  switch (v.kind()) {
    case Value::Kind::kUndefined:
      return {};
    case Value::Kind::kArray:
      return v.as_array();
    case Value::Kind::kString: {
      Array out;
      for (char32_t cp : utf8_decode(v.as_string())) {
        std::string c;
        utf8_append(c, cp);
        out.emplace_back(std::move(c));
      }
      return out;
    }
    case Value::Kind::kObject: {
      Array out;
      for (const auto& [k, val] : v.as_object().entries) out.emplace_back(k);
      return out;
    }
    default:
      fail("filter '", filter, "' needs a sequence, got ", v.type_name());
  }
}

std::string title_case(const std::string& s) {  // ref: reference renderer, /\b\w/ upper-cased
  std::string out = s;
  for (size_t i = 0; i < out.size(); ++i) {
    if (is_word_char(out[i]) && (i == 0 || !is_word_char(out[i - 1])) && out[i] >= 'a' && out[i] <= 'z') {
      out[i] = static_cast<char>(out[i] - 'a' + 'A');
    }
  }
  return out;
}

std::string replace_all(const std::string& s, const std::string& from, const std::string& to, int64_t count) {
  if (count == 0) return s;
  std::string out;
  int64_t done = 0;
  if (from.empty()) {  // Python: insert `to` between code points (and at both ends)
    const std::u32string u = utf8_decode(s);
    for (size_t i = 0; i <= u.size(); ++i) {
      if (count < 0 || done < count) {
        out += to;
        ++done;
      }
      if (i < u.size()) utf8_append(out, u[i]);
    }
    return out;
  }
  size_t pos = 0;
  while (true) {
    const size_t hit = (count < 0 || done < count) ? s.find(from, pos) : std::string::npos;
    if (hit == std::string::npos) break;
    out.append(s, pos, hit - pos);
    out += to;
    pos = hit + from.size();
    ++done;
  }
  out.append(s, pos);
  return out;
}

Value f_safe(const Value& v, const CallArgs&) { return v; }

Value f_escape(const Value& v, const CallArgs&) {
  const std::string s = to_string(v);
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&#34;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out.push_back(c);
    }
  }
  return Value(std::move(out));
}

Value f_tojson(const Value& v, const CallArgs& args) {
  args.expect_at_most("tojson", 1, {"indent", "ensure_ascii", "sort_keys", "separators"});
  JsonOptions o;
  if (const Value* indent = args.get(0, "indent"); indent && !indent->is_none()) {
    if (!indent->is_int()) fail("tojson: indent must be an integer, got ", indent->type_name());
    o.indent = static_cast<int>(indent->as_int());
  }
  o.ensure_ascii = arg_bool(args, 99, "ensure_ascii", false, "tojson");
  o.sort_keys = arg_bool(args, 99, "sort_keys", false, "tojson");
  if (const Value* sep = args.get(99, "separators"); sep && !sep->is_none()) {
    if (!sep->is_array() || sep->as_array().size() != 2 || !sep->as_array()[0].is_string() ||
        !sep->as_array()[1].is_string()) {
      fail("tojson: separators must be a pair of strings");
    }
    o.separators = std::make_pair(sep->as_array()[0].as_string(), sep->as_array()[1].as_string());
  }
  return Value(to_json(v, o));
}

Value f_trim(const Value& v, const CallArgs& args) {
  return Value(strip_chars(text_of(v), args.get(0, "chars"), true, true));
}
Value f_upper(const Value& v, const CallArgs&) { return Value(utf8_upper(text_of(v))); }
Value f_lower(const Value& v, const CallArgs&) { return Value(utf8_lower(text_of(v))); }
Value f_title(const Value& v, const CallArgs&) { return Value(title_case(text_of(v))); }
Value f_capitalize(const Value& v, const CallArgs&) {
  std::u32string u = utf8_decode(text_of(v));
  if (!u.empty()) u[0] = to_upper(u[0]);
  return Value(utf8_encode(u));
}

Value f_length(const Value& v, const CallArgs&) {
  switch (v.kind()) {
    case Value::Kind::kUndefined:
      return Value(0);
    case Value::Kind::kString:
      return Value(static_cast<int64_t>(utf8_length(v.as_string())));
    case Value::Kind::kArray:
      return Value(static_cast<int64_t>(v.as_array().size()));
    case Value::Kind::kObject:
      return Value(static_cast<int64_t>(v.as_object().entries.size()));
    default:
      fail("filter 'length' needs a string, array or object, got ", v.type_name());
  }
}

Value f_first(const Value& v, const CallArgs&) {
  const Array a = as_sequence(v, "first");
  return a.empty() ? Value() : a.front();
}
Value f_last(const Value& v, const CallArgs&) {
  const Array a = as_sequence(v, "last");
  return a.empty() ? Value() : a.back();
}

Value f_join(const Value& v, const CallArgs& args) {
  const std::string sep = arg_string(args, 0, "d", arg_string(args, 99, "separator", "", "join"), "join");
  const std::string attr = arg_string(args, 1, "attribute", "", "join");
  std::string out;
  bool first = true;
  for (const Value& item : as_sequence(v, "join")) {
    if (!first) out += sep;
    first = false;
    out += to_string(attr.empty() ? item : attribute_path(item, attr));
  }
  return Value(std::move(out));
}

Value f_default(const Value& v, const CallArgs& args) {
  const Value* fallback = args.get(0, "default_value");
  const bool boolean = arg_bool(args, 1, "boolean", false, "default");
  if (v.is_undefined() || (boolean && !v.truthy())) return fallback ? *fallback : Value("");
  return v;
}

Value f_replace(const Value& v, const CallArgs& args) {
  const std::string s = to_string(v);
  const std::string from = to_string(arg_required(args, 0, "old", "replace"));
  const std::string to = to_string(arg_required(args, 1, "new", "replace"));
  return Value(replace_all(s, from, to, arg_int(args, 2, "count", -1, "replace")));
}

Value f_list(const Value& v, const CallArgs&) { return Value(as_sequence(v, "list")); }

Value f_items(const Value& v, const CallArgs&) {
  Array out;
  if (v.is_undefined()) return Value(std::move(out));
  if (!v.is_object()) fail("filter 'items' needs an object, got ", v.type_name());
  for (const auto& [k, val] : v.as_object().entries) out.emplace_back(Array{Value(k), val});
  return Value(std::move(out));
}

Value f_dictsort(const Value& v, const CallArgs& args) {
  if (!v.is_object()) fail("filter 'dictsort' needs an object, got ", v.type_name());
  const bool case_sensitive = arg_bool(args, 0, "case_sensitive", false, "dictsort");
  const std::string by = arg_string(args, 1, "by", "key", "dictsort");
  if (by != "key" && by != "value") fail("dictsort: 'by' must be 'key' or 'value', got '", by, "'");
  const bool reverse = arg_bool(args, 2, "reverse", false, "dictsort");
  Array items;
  for (const auto& [k, val] : v.as_object().entries) items.emplace_back(Array{Value(k), val});
  const size_t idx = by == "key" ? 0 : 1;
  std::stable_sort(items.begin(), items.end(), [&](const Value& a, const Value& b) {
    const int c = compare_values(a.as_array()[idx], b.as_array()[idx], case_sensitive);
    return reverse ? c > 0 : c < 0;
  });
  return Value(std::move(items));
}

// select/reject/selectattr/rejectattr: `attr` empty tests the items themselves.
Value select_impl(const Value& v, const CallArgs& args, bool by_attr, bool keep, std::string_view name) {
  const Array items = as_sequence(v, name);
  size_t next = 0;
  std::string attr;
  if (by_attr) attr = to_string(arg_required(args, next++, "attribute", name));
  std::string test;
  if (args.positional.size() > next) {
    const Value& t = args.positional[next++];
    if (!t.is_string()) fail(name, ": the test name must be a string, got ", t.type_name());
    test = t.as_string();
    if (!is_known_test(test)) fail(name, ": unknown test '", test, "'");
  }
  CallArgs test_args;
  test_args.positional.assign(
      args.positional.begin() + static_cast<std::ptrdiff_t>(std::min(next, args.positional.size())),
      args.positional.end());
  Array out;
  for (const Value& item : items) {
    const Value subject = by_attr ? attribute_path(item, attr) : item;
    const bool pass = test.empty() ? subject.truthy() : apply_test(test, subject, test_args);
    if (pass == keep) out.push_back(item);
  }
  return Value(std::move(out));
}
Value f_select(const Value& v, const CallArgs& a) { return select_impl(v, a, false, true, "select"); }
Value f_reject(const Value& v, const CallArgs& a) { return select_impl(v, a, false, false, "reject"); }
Value f_selectattr(const Value& v, const CallArgs& a) { return select_impl(v, a, true, true, "selectattr"); }
Value f_rejectattr(const Value& v, const CallArgs& a) { return select_impl(v, a, true, false, "rejectattr"); }

Value f_map(const Value& v, const CallArgs& args) {
  const Array items = as_sequence(v, "map");
  Array out;
  if (const Value* attr = args.get(99, "attribute")) {
    const std::string path = to_string(*attr);
    const Value* fallback = args.get(99, "default");
    for (const Value& item : items) {
      Value got = attribute_path(item, path);
      out.push_back(got.is_undefined() && fallback ? *fallback : got);
    }
    return Value(std::move(out));
  }
  const Value& filter = arg_required(args, 0, "filter", "map");
  if (!filter.is_string() || !is_known_filter(filter.as_string())) {
    fail("map: unknown filter '", to_string(filter), "'");
  }
  CallArgs rest;
  rest.positional.assign(args.positional.begin() + 1, args.positional.end());
  rest.keyword = args.keyword;
  for (const Value& item : items) out.push_back(apply_filter(filter.as_string(), item, rest));
  return Value(std::move(out));
}

Value f_unique(const Value& v, const CallArgs& args) {
  const bool case_sensitive = arg_bool(args, 0, "case_sensitive", false, "unique");
  const std::string attr = arg_string(args, 1, "attribute", "", "unique");
  Array out, keys;
  for (const Value& item : as_sequence(v, "unique")) {
    Value key = attr.empty() ? item : attribute_path(item, attr);
    if (!case_sensitive && key.is_string()) key = Value(utf8_lower(key.as_string()));
    bool seen = false;
    for (const Value& k : keys) seen = seen || values_equal(k, key);
    if (!seen) {
      keys.push_back(key);
      out.push_back(item);
    }
  }
  return Value(std::move(out));
}

Value f_reverse(const Value& v, const CallArgs&) {
  if (v.is_string()) {
    std::u32string u = utf8_decode(v.as_string());
    std::reverse(u.begin(), u.end());
    return Value(utf8_encode(u));
  }
  Array a = as_sequence(v, "reverse");
  std::reverse(a.begin(), a.end());
  return Value(std::move(a));
}

Value f_sort(const Value& v, const CallArgs& args) {
  Array a = as_sequence(v, "sort");
  const bool reverse = arg_bool(args, 0, "reverse", false, "sort");
  const bool case_sensitive = arg_bool(args, 1, "case_sensitive", false, "sort");
  const Value* attr = args.get(2, "attribute");
  const std::string path = attr && !attr->is_none() ? to_string(*attr) : "";
  std::stable_sort(a.begin(), a.end(), [&](const Value& x, const Value& y) {
    const int c = path.empty()
                      ? compare_values(x, y, case_sensitive)
                      : compare_values(attribute_path(x, path), attribute_path(y, path), case_sensitive);
    return reverse ? c > 0 : c < 0;
  });
  return Value(std::move(a));
}

// Parses a whole string as an integer in `base` (Python int(): surrounding space, sign, `_`).
std::optional<int64_t> parse_int(std::string s, int base) {
  s = strip_chars(s, nullptr, true, true);
  std::erase(s, '_');
  if (s.empty()) return std::nullopt;
  char* end = nullptr;
  errno = 0;
  const long long v = std::strtoll(s.c_str(), &end, base);
  if (errno != 0 || *end != '\0') return std::nullopt;
  return static_cast<int64_t>(v);
}

std::optional<double> parse_float(const std::string& str) {
  const std::string s = strip_chars(str, nullptr, true, true);
  if (s.empty()) return std::nullopt;
  char* end = nullptr;
  const double v = std::strtod(s.c_str(), &end);
  if (*end != '\0') return std::nullopt;
  return v;
}

Value f_int(const Value& v, const CallArgs& args) {
  const Value fallback = args.get(0, "default") ? *args.get(0, "default") : Value(0);
  const int64_t base = arg_int(args, 1, "base", 10, "int");
  switch (v.kind()) {
    case Value::Kind::kInt:
      return v;
    case Value::Kind::kBool:
      return Value(static_cast<int64_t>(v.as_bool()));
    case Value::Kind::kFloat:
      if (!std::isfinite(v.as_float())) return fallback;
      return Value(static_cast<int64_t>(std::trunc(v.as_float())));
    case Value::Kind::kString: {
      if (auto i = parse_int(v.as_string(), static_cast<int>(base))) return Value(*i);
      if (auto f = parse_float(v.as_string()); f && std::isfinite(*f))
        return Value(static_cast<int64_t>(std::trunc(*f)));
      return fallback;
    }
    default:
      return fallback;
  }
}

Value f_float(const Value& v, const CallArgs& args) {
  const Value fallback = args.get(0, "default") ? *args.get(0, "default") : Value(0.0);
  switch (v.kind()) {
    case Value::Kind::kInt:
    case Value::Kind::kBool:
    case Value::Kind::kFloat:
      return Value(v.as_number());
    case Value::Kind::kString: {
      if (auto f = parse_float(v.as_string())) return Value(*f);
      return fallback;
    }
    default:
      return fallback;
  }
}

Value f_string(const Value& v, const CallArgs&) { return Value(to_string(v)); }

Value f_round(const Value& v, const CallArgs& args) {
  if (!v.is_number() && !v.is_bool()) fail("filter 'round' needs a number, got ", v.type_name());
  const int64_t precision = arg_int(args, 0, "precision", 0, "round");
  const std::string method = arg_string(args, 1, "method", "common", "round");
  const double scale = std::pow(10.0, static_cast<double>(precision));
  const double x = v.as_number() * scale;
  double r;
  if (method == "common") {
    r = std::nearbyint(x);  // Python round(): halves go to even
  } else if (method == "ceil") {
    r = std::ceil(x);
  } else if (method == "floor") {
    r = std::floor(x);
  } else {
    fail("round: method must be 'common', 'ceil' or 'floor', got '", method, "'");
  }
  return Value(r / scale);
}

Value f_abs(const Value& v, const CallArgs&) {
  if (v.is_int()) return Value(v.as_int() < 0 ? -v.as_int() : v.as_int());
  if (v.is_float()) return Value(std::fabs(v.as_float()));
  fail("filter 'abs' needs a number, got ", v.type_name());
}

Value f_indent(const Value& v, const CallArgs& args) {
  const std::string s = to_string(v);
  std::string pad;
  if (const Value* w = args.get(0, "width"); w && w->is_string()) {
    pad = w->as_string();
  } else {
    pad = std::string(static_cast<size_t>(std::max<int64_t>(0, arg_int(args, 0, "width", 4, "indent"))), ' ');
  }
  const bool first = arg_bool(args, 1, "first", false, "indent");
  const bool blank = arg_bool(args, 2, "blank", false, "indent");
  std::string out;
  size_t start = 0;
  bool is_first = true;
  while (true) {
    const size_t nl = s.find('\n', start);
    const std::string line = s.substr(start, nl == std::string::npos ? std::string::npos : nl - start);
    if ((!is_first || first) && (blank || !line.empty())) out += pad;
    out += line;
    if (nl == std::string::npos) break;
    out += '\n';
    start = nl + 1;
    is_first = false;
  }
  return Value(std::move(out));
}

Value f_batch(const Value& v, const CallArgs& args) {
  const int64_t n = arg_int(args, 0, "linecount", 0, "batch");
  if (n <= 0) fail("batch: linecount must be positive, got ", n);
  const Value* fill = args.get(1, "fill_with");
  Array out, cur;
  for (const Value& item : as_sequence(v, "batch")) {
    cur.push_back(item);
    if (static_cast<int64_t>(cur.size()) == n) {
      out.emplace_back(std::move(cur));
      cur = Array();
    }
  }
  if (!cur.empty()) {
    while (fill && !fill->is_none() && static_cast<int64_t>(cur.size()) < n) cur.push_back(*fill);
    out.emplace_back(std::move(cur));
  }
  return Value(std::move(out));
}

Value f_wordcount(const Value& v, const CallArgs&) {
  const std::string s = to_string(v);
  int64_t n = 0;
  bool in_word = false;
  for (char c : s) {
    const bool w = is_word_char(c) || static_cast<unsigned char>(c) >= 0x80;
    if (w && !in_word) ++n;
    in_word = w;
  }
  return Value(n);
}

Value f_sum(const Value& v, const CallArgs& args) {
  const std::string attr = arg_string(args, 0, "attribute", "", "sum");
  Value total = args.get(1, "start") ? *args.get(1, "start") : Value(0);
  for (const Value& item : as_sequence(v, "sum")) {
    const Value x = attr.empty() ? item : attribute_path(item, attr);
    if (!(x.is_number() || x.is_bool()) || !(total.is_number() || total.is_bool())) {
      fail("sum: cannot add ", x.type_name(), " to ", total.type_name());
    }
    if (x.is_float() || total.is_float()) {
      total = Value(total.as_number() + x.as_number());
    } else {
      total = Value(static_cast<int64_t>(total.as_number()) + static_cast<int64_t>(x.as_number()));
    }
  }
  return total;
}

Value min_max(const Value& v, const CallArgs& args, bool want_max, std::string_view name) {
  const bool case_sensitive = arg_bool(args, 0, "case_sensitive", false, name);
  const std::string attr = arg_string(args, 1, "attribute", "", name);
  const Array items = as_sequence(v, name);
  if (items.empty()) return Value();
  size_t best = 0;
  for (size_t i = 1; i < items.size(); ++i) {
    const Value a = attr.empty() ? items[i] : attribute_path(items[i], attr);
    const Value b = attr.empty() ? items[best] : attribute_path(items[best], attr);
    const int c = compare_values(a, b, case_sensitive);
    if (want_max ? c > 0 : c < 0) best = i;
  }
  return items[best];
}
Value f_min(const Value& v, const CallArgs& a) { return min_max(v, a, false, "min"); }
Value f_max(const Value& v, const CallArgs& a) { return min_max(v, a, true, "max"); }

Value f_attr(const Value& v, const CallArgs& args) {
  const std::string name = to_string(arg_required(args, 0, "name", "attr"));
  if (v.is_object()) {
    if (const Value* x = v.as_object().find(name)) return *x;
  }
  return Value();
}

Value f_bool(const Value& v, const CallArgs&) { return Value(v.truthy()); }

// Python's `%` formatting for %s, %d, %i, %f, %r and %% (the `format` filter).
Value f_format(const Value& v, const CallArgs& args) {
  const std::string fmt = text_of(v);  // Jinja2: the value's text % the arguments
  std::string out;
  size_t next = 0;
  for (size_t i = 0; i < fmt.size(); ++i) {
    if (fmt[i] != '%' || i + 1 == fmt.size()) {
      out.push_back(fmt[i]);
      continue;
    }
    const char c = fmt[++i];
    if (c == '%') {
      out.push_back('%');
      continue;
    }
    if (next >= args.positional.size()) fail("format: not enough arguments for the format string");
    const Value& a = args.positional[next++];
    if (c == 's' || c == 'r') {
      out += to_string(a);
    } else if (c == 'd' || c == 'i') {
      out += std::to_string(static_cast<int64_t>(a.as_number()));
    } else if (c == 'f') {
      char buf[64];
      std::snprintf(buf, sizeof(buf), "%f", a.as_number());
      out += buf;
    } else {
      fail("format: unsupported conversion '%", c, "'");
    }
  }
  return Value(std::move(out));
}

const std::map<std::string, FilterFn, std::less<>>& filters() {
  static const std::map<std::string, FilterFn, std::less<>> table = {
      {"abs", f_abs},
      {"attr", f_attr},
      {"batch", f_batch},
      {"bool", f_bool},
      {"capitalize", f_capitalize},
      {"count", f_length},
      {"d", f_default},
      {"default", f_default},
      {"dictsort", f_dictsort},
      {"e", f_escape},
      {"escape", f_escape},
      {"first", f_first},
      {"float", f_float},
      {"forceescape", f_escape},
      {"format", f_format},
      {"indent", f_indent},
      {"int", f_int},
      {"items", f_items},
      {"join", f_join},
      {"last", f_last},
      {"length", f_length},
      {"list", f_list},
      {"lower", f_lower},
      {"map", f_map},
      {"max", f_max},
      {"min", f_min},
      {"reject", f_reject},
      {"rejectattr", f_rejectattr},
      {"replace", f_replace},
      {"reverse", f_reverse},
      {"round", f_round},
      {"safe", f_safe},
      {"select", f_select},
      {"selectattr", f_selectattr},
      {"sort", f_sort},
      {"string", f_string},
      {"sum", f_sum},
      {"title", f_title},
      {"tojson", f_tojson},
      {"trim", f_trim},
      {"unique", f_unique},
      {"upper", f_upper},
      {"wordcount", f_wordcount},
  };
  return table;
}

}  // namespace

bool is_known_filter(std::string_view name) { return filters().find(name) != filters().end(); }

Value apply_filter(std::string_view name, const Value& operand, const CallArgs& args) {
  const auto it = filters().find(name);
  if (it == filters().end()) fail("unknown filter '", name, "'");  // one the parser deferred
  return it->second(operand, args);
}

}  // namespace kiln::jinja
