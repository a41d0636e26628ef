// Value: the dynamic type templates compute with (Python/Jinja2 semantics: an undefined value
// behaves as Jinja2's Undefined; printing follows @huggingface/jinja where it differs, e.g.
// `{{ true }}` renders "true", `{{ none }}` nothing, lists and mappings JSON).
// Arrays, objects and callables are shared by reference, as in Python: `list.append` and
// namespace attribute sets are visible through every copy. Not thread-safe; one render at a time.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

namespace kiln::jinja {

class Value;
using Array = std::vector<Value>;

// A mapping that keeps insertion order (Python dicts do). Keys are strings.
struct Object {
  std::vector<std::pair<std::string, Value>> entries;
  bool is_namespace = false;  // made by namespace(): its attributes may be assigned with `set`

  const Value* find(std::string_view key) const;
  Value* find(std::string_view key);
  void set(std::string key, Value value);
};

// Arguments of a call: positional first, then keyword (in source order).
struct CallArgs {
  std::vector<Value> positional;
  std::vector<std::pair<std::string, Value>> keyword;
  // For a macro called by `{% call %}`: the callable that renders the call block.
  std::shared_ptr<const Value> caller;

  // Argument `index` or keyword `name`; nullptr when given neither way.
  const Value* get(size_t index, std::string_view name) const;
  // Fails naming `what` when an argument beyond `max_positional` or a keyword outside `names` is given.
  void expect_at_most(std::string_view what, size_t max_positional,
                      std::initializer_list<std::string_view> names) const;
};

// A function value (global, bound method, macro, loop.cycle). Throws TemplateError on bad use.
struct Callable {
  std::string name;  // for error messages
  std::function<Value(const CallArgs&)> fn;
};

struct Undefined {
  friend bool operator==(Undefined, Undefined) { return true; }
};
struct None {
  friend bool operator==(None, None) { return true; }
};

class Value {
 public:
  enum class Kind : uint8_t { kUndefined, kNone, kBool, kInt, kFloat, kString, kArray, kObject, kCallable };

  Value() : v_(Undefined{}) {}
  Value(None) : v_(None{}) {}
  Value(bool b) : v_(b) {}
  Value(int v) : v_(int64_t{v}) {}
  Value(int64_t v) : v_(v) {}
  Value(double v) : v_(v) {}
  Value(std::string s) : v_(std::move(s)) {}
  Value(std::string_view s) : v_(std::string(s)) {}
  Value(const char* s) : v_(std::string(s)) {}
  Value(Array a) : v_(std::make_shared<Array>(std::move(a))) {}
  Value(Object o) : v_(std::make_shared<Object>(std::move(o))) {}
  Value(std::shared_ptr<Array> a) : v_(std::move(a)) {}
  Value(std::shared_ptr<Object> o) : v_(std::move(o)) {}
  Value(std::shared_ptr<Callable> c) : v_(std::move(c)) {}

  static Value callable(std::string name, std::function<Value(const CallArgs&)> fn) {
    return Value(std::make_shared<Callable>(Callable{std::move(name), std::move(fn)}));
  }

  Kind kind() const { return static_cast<Kind>(v_.index()); }
  bool is_undefined() const { return kind() == Kind::kUndefined; }
  bool is_none() const { return kind() == Kind::kNone; }
  bool is_bool() const { return kind() == Kind::kBool; }
  bool is_int() const { return kind() == Kind::kInt; }
  bool is_float() const { return kind() == Kind::kFloat; }
  bool is_number() const { return is_int() || is_float(); }
  bool is_string() const { return kind() == Kind::kString; }
  bool is_array() const { return kind() == Kind::kArray; }
  bool is_object() const { return kind() == Kind::kObject; }
  bool is_callable() const { return kind() == Kind::kCallable; }

  bool as_bool() const { return std::get<bool>(v_); }
  int64_t as_int() const { return std::get<int64_t>(v_); }
  double as_float() const { return std::get<double>(v_); }
  // A number (or bool) as a double.
  double as_number() const;
  const std::string& as_string() const { return std::get<std::string>(v_); }
  Array& as_array() const { return *std::get<std::shared_ptr<Array>>(v_); }
  Object& as_object() const { return *std::get<std::shared_ptr<Object>>(v_); }
  const Callable& as_callable() const { return *std::get<std::shared_ptr<Callable>>(v_); }

  // Python truthiness: empty strings, arrays and objects, zero, none and undefined are false.
  bool truthy() const;
  // Name of the type for error messages: "string", "array", "undefined"...
  std::string_view type_name() const;

 private:
  std::variant<Undefined, None, bool, int64_t, double, std::string, std::shared_ptr<Array>,
               std::shared_ptr<Object>, std::shared_ptr<Callable>>
      v_;
};

// A copy that shares no array or object with `v` (callables stay shared).
Value deep_copy(const Value& v);
// Text of a value as `~`, `string` and join make it: the reference renderer's spelling
// (true/false, 1.0, JSON for arrays and objects, None for none, "" for undefined).
std::string to_string(const Value& v);
// Text of an operand of `~` or of `+` with a string, as the reference renderer joins them
// (JavaScript's toString of the value): like to_string, except that floats lose a ".0" and a
// top-level array is its items' texts joined by ",".
std::string to_concat_string(const Value& v);
// Text of `{{ v }}`: like to_string, but none renders as nothing (the reference renderer's rule).
std::string to_output(const Value& v);
// Python ==: numbers compare by value across int/float/bool, containers deeply.
bool values_equal(const Value& a, const Value& b);
// Ordering for sort/dictsort/min/max and < >: numbers, or strings (case-folded unless
// case_sensitive). Returns <0, 0, >0; throws TemplateError for values that do not order.
int compare_values(const Value& a, const Value& b, bool case_sensitive);
// A float in the reference renderer's spelling: "1.0", "0.5", "1e+21" (JavaScript digits).
std::string format_float(double v);
// A number as JavaScript's JSON.stringify writes it (floats with no fraction lose ".0").
std::string format_json_number(const Value& v);

}  // namespace kiln::jinja
