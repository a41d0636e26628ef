#include "text/jinja/interpreter.h"

#include <algorithm>
#include <cmath>
#include <optional>

#include "text/jinja/builtins.h"
#include "text/jinja/utf8.h"

namespace kiln::jinja {

namespace {

// Deep enough for real templates (format_argument-style recursion over tool schemas), shallow
// enough that a runaway recursion ends with an error, not a stack overflow.
constexpr int kMaxCallDepth = 200;

class Scope {
 public:
  explicit Scope(std::shared_ptr<Scope> parent) : parent_(std::move(parent)) {}

  const Value* lookup(std::string_view name) const {
    for (const Scope* s = this; s; s = s->parent_.get()) {
      if (const Value* v = s->vars_.find(name)) return v;
    }
    return nullptr;
  }
  void set(std::string name, Value v) { vars_.set(std::move(name), std::move(v)); }
  // Drops every variable (breaks reference cycles between a scope and the macros it holds).
  void clear() { vars_.entries.clear(); }

 private:
  std::shared_ptr<Scope> parent_;
  Object vars_;
};
using ScopePtr = std::shared_ptr<Scope>;

enum class Flow { kNormal, kBreak, kContinue };

// Python's floor division and modulo for integers.
int64_t floor_div(int64_t a, int64_t b) {
  int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}
int64_t floor_mod(int64_t a, int64_t b) {
  int64_t r = a % b;
  if (r != 0 && ((r < 0) != (b < 0))) r += b;
  return r;
}

// Python-style index normalisation: negative counts from the end; nullopt when out of range.
std::optional<size_t> normalize_index(int64_t i, size_t size) {
  if (i < 0) i += static_cast<int64_t>(size);
  if (i < 0 || i >= static_cast<int64_t>(size)) return std::nullopt;
  return static_cast<size_t>(i);
}

// Python slice semantics over `size` elements: the indices picked, in order.
std::vector<size_t> slice_indices(size_t size, const Value& start_v, const Value& stop_v,
                                  const Value& step_v) {
  auto as_opt = [](const Value& v, std::string_view what) -> std::optional<int64_t> {
    if (v.is_undefined() || v.is_none()) return std::nullopt;
    if (!v.is_int()) fail("slice ", what, " must be an integer, got ", v.type_name());
    return v.as_int();
  };
  const int64_t n = static_cast<int64_t>(size);
  const int64_t step = as_opt(step_v, "step").value_or(1);
  if (step == 0) fail("slice step cannot be zero");
  auto clamp = [&](std::optional<int64_t> v, int64_t dflt) {
    if (!v) return dflt;
    int64_t x = *v;
    if (x < 0) x += n;
    if (step > 0) return std::clamp<int64_t>(x, 0, n);
    return std::clamp<int64_t>(x, -1, n - 1);
  };
  const int64_t start = clamp(as_opt(start_v, "start"), step > 0 ? 0 : n - 1);
  const int64_t stop = clamp(as_opt(stop_v, "stop"), step > 0 ? n : -1);
  std::vector<size_t> out;
  for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) out.push_back(static_cast<size_t>(i));
  return out;
}

class Interpreter {
 public:
  ~Interpreter() {
    for (const ScopePtr& s : macro_scopes_) s->clear();
  }

  std::string run(const Body& body, const Object& globals) {
    auto scope = std::make_shared<Scope>(nullptr);
    for (const auto& [k, v] : globals.entries) scope->set(k, v);
    macro_scopes_.push_back(scope);
    std::string out;
    exec(body, scope, out);
    return out;
  }

 private:
  Flow exec(const Body& body, const ScopePtr& scope, std::string& out) {
    for (const StmtPtr& s : body) {
      const Flow f = exec_stmt(*s, scope, out);
      if (f != Flow::kNormal) return f;
    }
    return Flow::kNormal;
  }

  Flow exec_stmt(const Stmt& s, const ScopePtr& scope, std::string& out) {
    try {
      switch (s.kind) {
        case Stmt::Kind::kText:
          out += s.text;
          return Flow::kNormal;
        case Stmt::Kind::kOutput:
          out += to_output(eval(*s.expr, scope));
          return Flow::kNormal;
        case Stmt::Kind::kIf:
          return exec(eval(*s.expr, scope).truthy() ? s.body : s.else_body, scope, out);
        case Stmt::Kind::kFor:
          return exec_for(s, scope, out);
        case Stmt::Kind::kSet:
          exec_set(s, scope);
          return Flow::kNormal;
        case Stmt::Kind::kSetBlock: {
          std::string text;
          exec(s.body, scope, text);
          scope->set(s.targets[0], Value(std::move(text)));
          return Flow::kNormal;
        }
        case Stmt::Kind::kMacro:
          scope->set(s.text, make_macro(s.text, s.params, s.body, scope));
          macro_scopes_.push_back(scope);
          return Flow::kNormal;
        case Stmt::Kind::kCallBlock: {
          const Expr& call = *s.expr;
          const Value callee = eval(*call.a, scope);
          CallArgs args = eval_args(call, scope);
          args.caller = std::make_shared<const Value>(make_macro("caller", s.params, s.body, scope));
          out += to_output(invoke(callee, args, *call.a));
          return Flow::kNormal;
        }
        case Stmt::Kind::kFilterBlock: {
          std::string text;
          exec(s.body, scope, text);
          out += to_output(eval_filter_chain(*s.expr, Value(std::move(text)), scope));
          return Flow::kNormal;
        }
        case Stmt::Kind::kBreak:
          return Flow::kBreak;
        case Stmt::Kind::kContinue:
          return Flow::kContinue;
      }
    } catch (TemplateError& e) {
      e.locate(s.where);
      throw;
    }
    return Flow::kNormal;
  }

  // Binds loop targets: one name takes the item; several unpack an array item.
  static void bind_targets(const std::vector<std::string>& targets, const Value& item, Scope& scope) {
    if (targets.size() == 1) {
      scope.set(targets[0], item);
      return;
    }
    if (!item.is_array()) fail("cannot unpack ", item.type_name(), " into ", targets.size(), " names");
    const Array& a = item.as_array();
    if (a.size() != targets.size()) {
      fail("cannot unpack ", a.size(), " values into ", targets.size(), " names");
    }
    for (size_t i = 0; i < targets.size(); ++i) scope.set(targets[i], a[i]);
  }

  static Array iterate(const Value& v) {
    switch (v.kind()) {
      case Value::Kind::kUndefined:
        return {};
      case Value::Kind::kArray:
        return v.as_array();
      case Value::Kind::kObject: {
        Array keys;
        for (const auto& [k, val] : v.as_object().entries) keys.emplace_back(k);
        return keys;
      }
      case Value::Kind::kString: {
        Array chars;
        for (char32_t cp : utf8_decode(v.as_string())) {
          std::string c;
          utf8_append(c, cp);
          chars.emplace_back(std::move(c));
        }
        return chars;
      }
      default:
        fail("cannot iterate over ", v.type_name());
    }
  }

  Flow exec_for(const Stmt& s, const ScopePtr& outer, std::string& out) {
    auto scope = std::make_shared<Scope>(outer);
    Array all = iterate(eval(*s.expr, scope));
    Array items;
    if (s.cond) {
      for (Value& item : all) {
        auto probe = std::make_shared<Scope>(scope);
        bind_targets(s.targets, item, *probe);
        if (eval(*s.cond, probe).truthy()) items.push_back(std::move(item));
      }
    } else {
      items = std::move(all);
    }
    if (items.empty()) return exec(s.else_body, scope, out);
    const size_t n = items.size();
    for (size_t i = 0; i < n; ++i) {
      Object loop;
      loop.set("index", Value(static_cast<int64_t>(i + 1)));
      loop.set("index0", Value(static_cast<int64_t>(i)));
      loop.set("revindex", Value(static_cast<int64_t>(n - i)));
      loop.set("revindex0", Value(static_cast<int64_t>(n - i - 1)));
      loop.set("first", Value(i == 0));
      loop.set("last", Value(i + 1 == n));
      loop.set("length", Value(static_cast<int64_t>(n)));
      loop.set("depth", Value(1));
      loop.set("depth0", Value(0));
      loop.set("previtem", i > 0 ? items[i - 1] : Value());
      loop.set("nextitem", i + 1 < n ? items[i + 1] : Value());
      loop.set("cycle", Value::callable("loop.cycle", [i](const CallArgs& args) -> Value {
                 if (args.positional.empty()) fail("loop.cycle() needs at least one argument");
                 return args.positional[i % args.positional.size()];
               }));
      scope->set("loop", Value(std::move(loop)));
      bind_targets(s.targets, items[i], *scope);
      if (exec(s.body, scope, out) == Flow::kBreak) break;
    }
    return Flow::kNormal;
  }

  void exec_set(const Stmt& s, const ScopePtr& scope) {
    Value v = eval(*s.expr, scope);
    if (!s.attr.empty()) {
      const Value* target = scope->lookup(s.targets[0]);
      if (!target || !target->is_object() || !target->as_object().is_namespace) {
        fail("cannot set attribute '", s.attr, "' of '", s.targets[0], "': it is ",
             target ? target->type_name() : std::string_view("undefined"), ", not a namespace");
      }
      target->as_object().set(s.attr, std::move(v));
      return;
    }
    bind_targets(s.targets, v, *scope);
  }

  Value make_macro(const std::string& name, const std::vector<Param>& params, const Body& body,
                   const ScopePtr& defining) {
    return Value::callable(name, [this, name, &params, &body, defining](const CallArgs& args) -> Value {
      if (args.positional.size() > params.size()) {
        fail("macro '", name, "' takes at most ", params.size(), " argument(s), got ",
             args.positional.size());
      }
      auto scope = std::make_shared<Scope>(defining);
      for (const auto& [k, v] : args.keyword) {
        bool known = false;
        for (const Param& p : params) known = known || p.name == k;
        if (!known) fail("macro '", name, "' has no parameter '", k, "'");
      }
      for (size_t i = 0; i < params.size(); ++i) {
        if (const Value* v = args.get(i, params[i].name)) {
          scope->set(params[i].name, *v);
        } else {
          scope->set(params[i].name, Value());
        }
      }
      for (size_t i = 0; i < params.size(); ++i) {  // defaults see the other arguments
        if (!args.get(i, params[i].name) && params[i].default_value) {
          scope->set(params[i].name, eval(*params[i].default_value, scope));
        }
      }
      if (args.caller) scope->set("caller", *args.caller);
      if (++depth_ > kMaxCallDepth) {
        --depth_;
        fail("macro '", name, "': calls nested deeper than ", kMaxCallDepth);
      }
      std::string out;
      try {
        exec(body, scope, out);
      } catch (...) {
        --depth_;
        throw;
      }
      --depth_;
      return Value(std::move(out));
    });
  }

  static std::string describe_callee(const Expr& e) {
    if (e.kind == Expr::Kind::kName) return "'" + e.name + "'";
    if (e.kind == Expr::Kind::kAttr) return "'" + e.name + "'";
    return "the expression";
  }

  Value invoke(const Value& callee, const CallArgs& args, const Expr& callee_expr) {
    if (!callee.is_callable()) {
      if (callee.is_undefined()) fail(describe_callee(callee_expr), " is undefined and cannot be called");
      fail(describe_callee(callee_expr), " is ", callee.type_name(), ", not callable");
    }
    return callee.as_callable().fn(args);
  }

  CallArgs eval_args(const Expr& e, const ScopePtr& scope) {
    CallArgs args;
    for (const ExprPtr& a : e.items) args.positional.push_back(eval(*a, scope));
    for (const auto& [k, a] : e.kwargs) args.keyword.emplace_back(k, eval(*a, scope));
    return args;
  }

  Value eval_filter_chain(const Expr& f, Value body_text, const ScopePtr& scope) {
    Value operand = f.a ? eval_filter_chain(*f.a, std::move(body_text), scope) : std::move(body_text);
    return apply_filter(f.name, operand, eval_args(f, scope));
  }

  // `obj.name`, as Jinja2's getattr: a method of the value first (a mapping's `items`, `get`...
  // win over its keys of those names), then the mapping's key. A namespace has no methods.
  static Value get_attr(const Value& obj, const std::string& name) {
    Value method = member_of(obj, name);
    if (!method.is_undefined()) return method;
    if (obj.is_object()) {
      if (const Value* v = obj.as_object().find(name)) return *v;
    }
    return Value();
  }

  // `obj[key]`, as Jinja2's getitem: the mapping's key or the sequence's element, else the
  // value's method of that name; undefined where there is none: a missing or undefined key, a
  // key of another type, a value that cannot be indexed. (Jinja2 raises only on an undefined
  // `obj`; kiln yields undefined there too, as llama.cpp's engine does.)
  static Value get_item(const Value& obj, const Value& key) {
    if (key.is_string()) {
      if (obj.is_object()) {
        if (const Value* v = obj.as_object().find(key.as_string())) return *v;
      }
      return member_of(obj, key.as_string());
    }
    if (key.is_int()) {
      if (obj.is_array()) {
        const Array& a = obj.as_array();
        const auto i = normalize_index(key.as_int(), a.size());
        return i ? a[*i] : Value();
      }
      if (obj.is_string()) {
        const std::u32string s = utf8_decode(obj.as_string());
        const auto i = normalize_index(key.as_int(), s.size());
        return i ? Value(utf8_encode(s.substr(*i, 1))) : Value();
      }
    }
    return Value();
  }

  Value eval_slice(const Expr& e, const ScopePtr& scope) {
    const Value obj = eval(*e.a, scope);
    const Value start = e.b ? eval(*e.b, scope) : Value();
    const Value stop = e.c ? eval(*e.c, scope) : Value();
    const Value step = e.d ? eval(*e.d, scope) : Value();
    if (obj.is_array()) {
      const Array& a = obj.as_array();
      Array out;
      for (size_t i : slice_indices(a.size(), start, stop, step)) out.push_back(a[i]);
      return Value(std::move(out));
    }
    if (obj.is_string()) {
      const std::u32string s = utf8_decode(obj.as_string());
      std::u32string out;
      for (size_t i : slice_indices(s.size(), start, stop, step)) out.push_back(s[i]);
      return Value(utf8_encode(out));
    }
    fail("cannot slice ", obj.type_name());
  }

  static bool contains(const Value& container, const Value& item) {
    switch (container.kind()) {
      case Value::Kind::kUndefined:
        return false;
      case Value::Kind::kString:
        if (!item.is_string()) fail("'in <string>' needs a string on the left, got ", item.type_name());
        return container.as_string().find(item.as_string()) != std::string::npos;
      case Value::Kind::kArray:
        for (const Value& v : container.as_array()) {
          if (values_equal(v, item)) return true;
        }
        return false;
      case Value::Kind::kObject:
        return item.is_string() && container.as_object().find(item.as_string()) != nullptr;
      default:
        fail("'in' needs a string, array or object on the right, got ", container.type_name());
    }
  }

  static Value arithmetic(const std::string& op, const Value& l, const Value& r) {
    if (op == "~") return Value(to_concat_string(l) + to_concat_string(r));
    if (op == "in") return Value(contains(r, l));
    if (op == "not in") return Value(!contains(r, l));
    if (op == "==") return Value(values_equal(l, r));
    if (op == "!=") return Value(!values_equal(l, r));
    if (op == "<" || op == ">" || op == "<=" || op == ">=") {
      const int c = compare_values(l, r, true);
      return Value(op == "<" ? c < 0 : op == ">" ? c > 0 : op == "<=" ? c <= 0 : c >= 0);
    }
    const bool l_num = l.is_number() || l.is_bool();
    const bool r_num = r.is_number() || r.is_bool();
    if (l_num && r_num) {
      const bool ints = !l.is_float() && !r.is_float();
      if (ints) {
        const int64_t a = l.is_bool() ? l.as_bool() : l.as_int();
        const int64_t b = r.is_bool() ? r.as_bool() : r.as_int();
        if (op == "+") return Value(a + b);
        if (op == "-") return Value(a - b);
        if (op == "*") return Value(a * b);
        if ((op == "/" || op == "//" || op == "%") && b == 0) fail("division by zero ('", op, "')");
        if (op == "/") return Value(static_cast<double>(a) / static_cast<double>(b));
        if (op == "//") return Value(floor_div(a, b));
        if (op == "%") return Value(floor_mod(a, b));
        if (op == "**") {
          if (b < 0) return Value(std::pow(static_cast<double>(a), static_cast<double>(b)));
          int64_t p = 1;
          for (int64_t i = 0; i < b && i < 64; ++i) p *= a;
          return Value(p);
        }
      } else {
        const double a = l.as_number(), b = r.as_number();
        if (op == "+") return Value(a + b);
        if (op == "-") return Value(a - b);
        if (op == "*") return Value(a * b);
        if ((op == "/" || op == "//" || op == "%") && b == 0) fail("division by zero ('", op, "')");
        if (op == "/") return Value(a / b);
        if (op == "//") return Value(std::floor(a / b));
        if (op == "%") return Value(a - b * std::floor(a / b));
        if (op == "**") return Value(std::pow(a, b));
      }
    }
    if (op == "+") {
      if (l.is_array() && r.is_array()) {
        Array out = l.as_array();
        out.insert(out.end(), r.as_array().begin(), r.as_array().end());
        return Value(std::move(out));
      }
      // The reference renderer joins a string with anything by `+`.
      if ((l.is_string() && !r.is_undefined() && !r.is_none()) ||
          (r.is_string() && !l.is_undefined() && !l.is_none())) {
        return Value(to_concat_string(l) + to_concat_string(r));
      }
    }
    if (op == "*") {
      const Value* s = l.is_string() || l.is_array() ? &l : r.is_string() || r.is_array() ? &r : nullptr;
      const Value* n = s == &l ? &r : &l;
      if (s && n->is_int()) {
        if (s->is_string()) {
          std::string out;
          for (int64_t i = 0; i < n->as_int(); ++i) out += s->as_string();
          return Value(std::move(out));
        }
        Array out;
        for (int64_t i = 0; i < n->as_int(); ++i)
          out.insert(out.end(), s->as_array().begin(), s->as_array().end());
        return Value(std::move(out));
      }
    }
    fail("unsupported operand types for '", op, "': ", l.type_name(), " and ", r.type_name());
  }

  Value eval(const Expr& e, const ScopePtr& scope) {
    try {
      return eval_unlocated(e, scope);
    } catch (TemplateError& err) {
      err.locate(e.where);
      throw;
    }
  }

  Value eval_unlocated(const Expr& e, const ScopePtr& scope) {
    switch (e.kind) {
      case Expr::Kind::kLiteral:
        return e.literal;
      case Expr::Kind::kName: {
        const Value* v = scope->lookup(e.name);
        return v ? *v : Value();
      }
      case Expr::Kind::kList:
      case Expr::Kind::kTuple: {
        Array a;
        for (const ExprPtr& item : e.items) a.push_back(eval(*item, scope));
        return Value(std::move(a));
      }
      case Expr::Kind::kDict: {
        Object o;
        for (size_t i = 0; i + 1 < e.items.size(); i += 2) {
          const Value key = eval(*e.items[i], scope);
          if (!key.is_string()) fail("dict keys must be strings, got ", key.type_name());
          o.set(key.as_string(), eval(*e.items[i + 1], scope));
        }
        return Value(std::move(o));
      }
      case Expr::Kind::kUnary: {
        const Value v = eval(*e.a, scope);
        if (e.name == "not") return Value(!v.truthy());
        if (v.is_int() || v.is_bool()) {
          const int64_t x = v.is_bool() ? v.as_bool() : v.as_int();
          return Value(e.name == "-" ? -x : x);
        }
        if (v.is_float()) return Value(e.name == "-" ? -v.as_float() : v.as_float());
        fail("bad operand type for unary '", e.name, "': ", v.type_name());
      }
      case Expr::Kind::kBinary:
        return arithmetic(e.name, eval(*e.a, scope), eval(*e.b, scope));
      case Expr::Kind::kAnd: {
        Value l = eval(*e.a, scope);
        return l.truthy() ? eval(*e.b, scope) : l;
      }
      case Expr::Kind::kOr: {
        Value l = eval(*e.a, scope);
        return l.truthy() ? l : eval(*e.b, scope);
      }
      case Expr::Kind::kCondition:
        if (eval(*e.b, scope).truthy()) return eval(*e.a, scope);
        return e.c ? eval(*e.c, scope) : Value();
      case Expr::Kind::kAttr:
        return get_attr(eval(*e.a, scope), e.name);
      case Expr::Kind::kSubscript:
        return get_item(eval(*e.a, scope), eval(*e.b, scope));
      case Expr::Kind::kSlice:
        return eval_slice(e, scope);
      case Expr::Kind::kCall: {
        const Value callee = eval(*e.a, scope);
        return invoke(callee, eval_args(e, scope), *e.a);
      }
      case Expr::Kind::kFilter:
        return apply_filter(e.name, eval(*e.a, scope), eval_args(e, scope));
      case Expr::Kind::kTest: {
        const bool r = apply_test(e.name, eval(*e.a, scope), eval_args(e, scope));
        return Value(e.negate ? !r : r);
      }
    }
    return Value();
  }

  std::vector<ScopePtr> macro_scopes_;  // scopes that hold macros (cleared at the end: cycles)
  int depth_ = 0;
};

}  // namespace

std::string render_body(const Body& body, const Object& globals) { return Interpreter().run(body, globals); }

}  // namespace kiln::jinja
