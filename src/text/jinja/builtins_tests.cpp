// Tests (`x is name`). `iterable` and `sequence` follow the reference renderer: an object is a
// sequence but not iterable.
#include <map>

#include "text/jinja/builtins.h"
#include "text/jinja/builtins_common.h"

namespace kiln::jinja {

namespace {

using TestFn = bool (*)(const Value& v, const CallArgs& args);

bool is_lower_text(const std::string& s, bool upper) {
  for (char c : s) {
    if (upper ? (c >= 'a' && c <= 'z') : (c >= 'A' && c <= 'Z')) return false;
  }
  return true;
}

int64_t need_int(const Value& v, std::string_view test) {
  if (!v.is_int()) fail("test '", test, "' needs an integer, got ", v.type_name());
  return v.as_int();
}

bool t_defined(const Value& v, const CallArgs&) { return !v.is_undefined(); }
bool t_undefined(const Value& v, const CallArgs&) { return v.is_undefined(); }
bool t_none(const Value& v, const CallArgs&) { return v.is_none(); }
bool t_string(const Value& v, const CallArgs&) { return v.is_string(); }
bool t_number(const Value& v, const CallArgs&) { return v.is_number(); }
bool t_integer(const Value& v, const CallArgs&) { return v.is_int(); }
bool t_float(const Value& v, const CallArgs&) { return v.is_float(); }
bool t_mapping(const Value& v, const CallArgs&) { return v.is_object(); }
// As Jinja2's tests: an undefined value iterates as empty, has a length (0) and an item
// operator, and a call operator (that raises), so it is iterable, a sequence and callable.
bool t_iterable(const Value& v, const CallArgs&) {
  return v.is_array() || v.is_string() || v.is_object() || v.is_undefined();
}
bool t_sequence(const Value& v, const CallArgs&) {
  return v.is_array() || v.is_string() || v.is_object() || v.is_undefined();
}
bool t_boolean(const Value& v, const CallArgs&) { return v.is_bool(); }
bool t_true(const Value& v, const CallArgs&) { return v.is_bool() && v.as_bool(); }
bool t_false(const Value& v, const CallArgs&) { return v.is_bool() && !v.as_bool(); }
bool t_callable(const Value& v, const CallArgs&) { return v.is_callable() || v.is_undefined(); }
bool t_even(const Value& v, const CallArgs&) { return need_int(v, "even") % 2 == 0; }
bool t_odd(const Value& v, const CallArgs&) { return need_int(v, "odd") % 2 != 0; }
bool t_lower(const Value& v, const CallArgs&) { return v.is_string() && is_lower_text(v.as_string(), false); }
bool t_upper(const Value& v, const CallArgs&) { return v.is_string() && is_lower_text(v.as_string(), true); }
bool t_escaped(const Value&, const CallArgs&) { return false; }  // no markup-safe strings here

bool t_divisibleby(const Value& v, const CallArgs& args) {
  const int64_t d = need_int(arg_required(args, 0, "num", "divisibleby"), "divisibleby");
  if (d == 0) fail("test 'divisibleby': division by zero");
  return need_int(v, "divisibleby") % d == 0;
}

bool t_in(const Value& v, const CallArgs& args) {
  const Value& seq = arg_required(args, 0, "seq", "in");
  if (seq.is_array()) {
    for (const Value& x : seq.as_array()) {
      if (values_equal(x, v)) return true;
    }
    return false;
  }
  if (seq.is_string()) return v.is_string() && seq.as_string().find(v.as_string()) != std::string::npos;
  if (seq.is_object()) return v.is_string() && seq.as_object().find(v.as_string()) != nullptr;
  fail("test 'in' needs a sequence, got ", seq.type_name());
}

int compare_arg(const Value& v, const CallArgs& args, std::string_view test) {
  return compare_values(v, arg_required(args, 0, "other", test), true);
}
bool t_eq(const Value& v, const CallArgs& args) {
  return values_equal(v, arg_required(args, 0, "other", "eq"));
}
bool t_ne(const Value& v, const CallArgs& args) {
  return !values_equal(v, arg_required(args, 0, "other", "ne"));
}
bool t_lt(const Value& v, const CallArgs& args) { return compare_arg(v, args, "lt") < 0; }
bool t_le(const Value& v, const CallArgs& args) { return compare_arg(v, args, "le") <= 0; }
bool t_gt(const Value& v, const CallArgs& args) { return compare_arg(v, args, "gt") > 0; }
bool t_ge(const Value& v, const CallArgs& args) { return compare_arg(v, args, "ge") >= 0; }

bool t_sameas(const Value& v, const CallArgs& args) {
  const Value& other = arg_required(args, 0, "other", "sameas");
  if (v.kind() != other.kind()) return false;
  if (v.is_array()) return &v.as_array() == &other.as_array();
  if (v.is_object()) return &v.as_object() == &other.as_object();
  return values_equal(v, other);
}

bool t_filter(const Value& v, const CallArgs&) { return v.is_string() && is_known_filter(v.as_string()); }
bool t_test(const Value& v, const CallArgs&) { return v.is_string() && is_known_test(v.as_string()); }

const std::map<std::string, TestFn, std::less<>>& tests() {
  static const std::map<std::string, TestFn, std::less<>> table = {
      {"boolean", t_boolean},
      {"callable", t_callable},
      {"defined", t_defined},
      {"divisibleby", t_divisibleby},
      {"eq", t_eq},
      {"==", t_eq},
      {"equalto", t_eq},
      {"escaped", t_escaped},
      {"even", t_even},
      {"false", t_false},
      {"filter", t_filter},
      {"float", t_float},
      {"ge", t_ge},
      {">=", t_ge},
      {"gt", t_gt},
      {">", t_gt},
      {"greaterthan", t_gt},
      {"in", t_in},
      {"integer", t_integer},
      {"iterable", t_iterable},
      {"le", t_le},
      {"<=", t_le},
      {"lower", t_lower},
      {"lt", t_lt},
      {"<", t_lt},
      {"lessthan", t_lt},
      {"mapping", t_mapping},
      {"ne", t_ne},
      {"!=", t_ne},
      {"none", t_none},
      {"number", t_number},
      {"odd", t_odd},
      {"sameas", t_sameas},
      {"sequence", t_sequence},
      {"string", t_string},
      {"test", t_test},
      {"true", t_true},
      {"undefined", t_undefined},
      {"upper", t_upper},
  };
  return table;
}

}  // namespace

bool is_known_test(std::string_view name) { return tests().find(name) != tests().end(); }

bool apply_test(std::string_view name, const Value& operand, const CallArgs& args) {
  const auto it = tests().find(name);
  if (it == tests().end()) fail("unknown test '", name, "'");
  return it->second(operand, args);
}

}  // namespace kiln::jinja
