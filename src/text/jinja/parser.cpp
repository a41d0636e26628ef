#include "text/jinja/parser.h"

#include <charconv>
#include <cstdlib>
#include <initializer_list>

#include "text/jinja/builtins.h"
#include "text/jinja/lexer.h"
#include "text/jinja/name_check.h"

namespace kiln::jinja {

namespace {

// Nesting of expressions and blocks a template may use: far above real templates, low enough
// that a hostile template (they come from model files) cannot exhaust the stack.
constexpr int kMaxNesting = 256;

bool one_of(std::string_view s, std::initializer_list<std::string_view> names) {
  for (std::string_view n : names) {
    if (s == n) return true;
  }
  return false;
}

class Parser {
 public:
  explicit Parser(std::vector<Token> tokens) : t_(std::move(tokens)) {}

  Body run() {
    std::string found;
    Body body = parse_until({}, found, Location{}, "");
    return body;
  }

 private:
  const Token& peek(size_t ahead = 0) const {
    const size_t i = pos_ + ahead;
    return i < t_.size() ? t_[i] : t_.back();
  }
  const Token& next() {
    const Token& tok = peek();
    if (pos_ < t_.size() - 1) ++pos_;
    return tok;
  }
  bool is_op(std::string_view op, size_t ahead = 0) const {
    return peek(ahead).kind == TokenKind::kOp && peek(ahead).text == op;
  }
  bool is_name(std::string_view name, size_t ahead = 0) const {
    return peek(ahead).kind == TokenKind::kName && peek(ahead).text == name;
  }
  static std::string describe(const Token& tok) {
    switch (tok.kind) {
      case TokenKind::kText:
        return "text";
      case TokenKind::kOpenStmt:
        return "'{%'";
      case TokenKind::kCloseStmt:
        return "'%}'";
      case TokenKind::kOpenExpr:
        return "'{{'";
      case TokenKind::kCloseExpr:
        return "'}}'";
      case TokenKind::kEnd:
        return "end of template";
      case TokenKind::kString:
        return "string '" + tok.text + "'";
      default:
        return "'" + tok.text + "'";
    }
  }
  void expect_op(std::string_view op, std::string_view context) {
    if (!is_op(op)) fail_at(peek().where, "expected '", op, "' ", context, ", got ", describe(peek()));
    next();
  }
  std::string expect_name(std::string_view context) {
    if (peek().kind != TokenKind::kName)
      fail_at(peek().where, "expected a name ", context, ", got ", describe(peek()));
    return next().text;
  }
  void expect_close_stmt(std::string_view construct) {
    if (peek().kind != TokenKind::kCloseStmt) {
      fail_at(peek().where, "expected '%}' to end '", construct, "', got ", describe(peek()));
    }
    next();
  }

  // Parses statements until `{% name` with name in `ends` (consumed up to the name, which goes to
  // `found`). With no `ends`, parses to the end of the template.
  Body parse_until(std::initializer_list<std::string_view> ends, std::string& found, Location open,
                   std::string_view construct) {
    Body body;
    while (true) {
      const Token& tok = peek();
      switch (tok.kind) {
        case TokenKind::kEnd:
          if (ends.size() == 0) return body;
          fail_at(open, "unclosed '", construct, "' (expected '{% ", *(ends.end() - 1),
                  " %}' before the end of the template)");
        case TokenKind::kText: {
          auto s = make_stmt(Stmt::Kind::kText, tok.where);
          s->text = tok.text;
          next();
          body.push_back(std::move(s));
          break;
        }
        case TokenKind::kOpenExpr: {
          auto s = make_stmt(Stmt::Kind::kOutput, tok.where);
          next();
          s->expr = parse_expression();
          if (peek().kind != TokenKind::kCloseExpr) {
            fail_at(peek().where, "expected '}}' to end the expression, got ", describe(peek()));
          }
          next();
          body.push_back(std::move(s));
          break;
        }
        case TokenKind::kOpenStmt: {
          const Token& name = peek(1);
          if (name.kind == TokenKind::kName && one_of(name.text, ends)) {
            next();
            found = next().text;
            return body;
          }
          next();
          body.push_back(parse_statement());
          break;
        }
        default:
          fail_at(tok.where, "unexpected ", describe(tok));
      }
    }
  }

  static StmtPtr make_stmt(Stmt::Kind kind, Location where) {
    auto s = std::make_unique<Stmt>();
    s->kind = kind;
    s->where = where;
    return s;
  }

  // Counts one level of nesting for the lifetime of the guard; fails past kMaxNesting.
  class NestingGuard {
   public:
    NestingGuard(Parser& p, Location where) : p_(p) {
      if (++p_.nesting_ > kMaxNesting) fail_at(where, "template nested deeper than ", kMaxNesting, " levels");
    }
    ~NestingGuard() { --p_.nesting_; }

   private:
    Parser& p_;
  };

  StmtPtr parse_statement() {
    NestingGuard guard(*this, peek().where);
    const Token& tok = peek();
    if (tok.kind != TokenKind::kName)
      fail_at(tok.where, "expected a statement name after '{%', got ", describe(tok));
    const std::string name = next().text;
    const Location where = tok.where;
    if (name == "if") return parse_if(where);
    if (name == "for") return parse_for(where);
    if (name == "set") return parse_set(where);
    if (name == "macro") return parse_macro(where);
    if (name == "call") return parse_call_block(where);
    if (name == "filter") return parse_filter_block(where);
    if (name == "break" || name == "continue") {
      if (loop_depth_ == 0) fail_at(where, "'", name, "' outside a for loop");
      expect_close_stmt(name);
      return make_stmt(name == "break" ? Stmt::Kind::kBreak : Stmt::Kind::kContinue, where);
    }
    if (one_of(name,
               {"endif", "endfor", "endset", "endmacro", "endcall", "endfilter", "elif", "else", "endraw"})) {
      fail_at(where, "unexpected '", name, "' (no open block it could close)");
    }
    fail_at(where, "unsupported statement '", name, "'");
  }

  StmtPtr parse_if(Location where) {
    auto s = make_stmt(Stmt::Kind::kIf, where);
    s->expr = parse_expression();
    expect_close_stmt("if");
    std::string found;
    s->body = parse_until({"elif", "else", "endif"}, found, where, "if");
    if (found == "elif") {
      s->else_body.push_back(parse_if(peek().where));  // consumes through the shared endif
      return s;
    }
    if (found == "else") {
      expect_close_stmt("else");
      s->else_body = parse_until({"endif"}, found, where, "if");
    }
    expect_close_stmt("endif");
    return s;
  }

  std::vector<std::string> parse_targets(std::string_view construct) {
    std::vector<std::string> names;
    const bool paren = is_op("(");
    if (paren) next();
    names.push_back(expect_name(std::string("as the target of '") + std::string(construct) + "'"));
    while (is_op(",")) {
      next();
      names.push_back(expect_name(std::string("as a target of '") + std::string(construct) + "'"));
    }
    if (paren) expect_op(")", "after the targets");
    return names;
  }

  StmtPtr parse_for(Location where) {
    auto s = make_stmt(Stmt::Kind::kFor, where);
    s->targets = parse_targets("for");
    if (!is_name("in")) fail_at(peek().where, "expected 'in' in 'for', got ", describe(peek()));
    next();
    s->expr = parse_or();
    if (is_name("if")) {
      next();
      s->cond = parse_expression();
    }
    if (is_name("recursive")) fail_at(peek().where, "unsupported: recursive for loops");
    expect_close_stmt("for");
    std::string found;
    ++loop_depth_;
    s->body = parse_until({"else", "endfor"}, found, where, "for");
    --loop_depth_;
    if (found == "else") {
      expect_close_stmt("else");
      s->else_body = parse_until({"endfor"}, found, where, "for");
    }
    expect_close_stmt("endfor");
    return s;
  }

  StmtPtr parse_set(Location where) {
    auto s = make_stmt(Stmt::Kind::kSet, where);
    s->targets = parse_targets("set");
    if (s->targets.size() == 1 && is_op(".")) {
      next();
      s->attr = expect_name("after '.' in 'set'");
    }
    if (is_op("=")) {
      next();
      s->expr = parse_tuple_or_expression();
      expect_close_stmt("set");
      return s;
    }
    if (s->targets.size() != 1 || !s->attr.empty()) fail_at(peek().where, "expected '=' in 'set'");
    s->kind = Stmt::Kind::kSetBlock;
    expect_close_stmt("set");
    std::string found;
    s->body = parse_until({"endset"}, found, where, "set");
    expect_close_stmt("endset");
    return s;
  }

  std::vector<Param> parse_params(std::string_view construct) {
    std::vector<Param> params;
    expect_op("(", std::string("to open the parameters of '") + std::string(construct) + "'");
    while (!is_op(")")) {
      Param p;
      p.name = expect_name(std::string("as a parameter of '") + std::string(construct) + "'");
      for (const Param& q : params) {
        if (q.name == p.name)
          fail_at(peek().where, "duplicate parameter '", p.name, "' in '", construct, "'");
      }
      if (is_op("=")) {
        next();
        p.default_value = parse_expression();
      } else if (!params.empty() && params.back().default_value) {
        fail_at(peek().where, "parameter '", p.name, "' without a default follows one with a default");
      }
      params.push_back(std::move(p));
      if (!is_op(",")) break;
      next();
    }
    expect_op(")", std::string("to close the parameters of '") + std::string(construct) + "'");
    return params;
  }

  StmtPtr parse_macro(Location where) {
    auto s = make_stmt(Stmt::Kind::kMacro, where);
    s->text = expect_name("after 'macro'");
    s->params = parse_params("macro " + s->text);
    expect_close_stmt("macro");
    std::string found;
    const int saved_depth = loop_depth_;
    loop_depth_ = 0;
    s->body = parse_until({"endmacro"}, found, where, "macro");
    loop_depth_ = saved_depth;
    expect_close_stmt("endmacro");
    return s;
  }

  StmtPtr parse_call_block(Location where) {
    auto s = make_stmt(Stmt::Kind::kCallBlock, where);
    if (is_op("(")) s->params = parse_params("call");
    s->expr = parse_postfix();
    if (s->expr->kind != Expr::Kind::kCall) fail_at(s->expr->where, "expected a macro call after 'call'");
    expect_close_stmt("call");
    std::string found;
    const int saved_depth = loop_depth_;
    loop_depth_ = 0;
    s->body = parse_until({"endcall"}, found, where, "call");
    loop_depth_ = saved_depth;
    expect_close_stmt("endcall");
    return s;
  }

  StmtPtr parse_filter_block(Location where) {
    auto s = make_stmt(Stmt::Kind::kFilterBlock, where);
    ExprPtr chain;  // operand null: the block's text
    do {
      if (chain) next();  // the '|'
      chain = parse_filter_call(std::move(chain));
    } while (is_op("|"));
    s->expr = std::move(chain);
    expect_close_stmt("filter");
    std::string found;
    s->body = parse_until({"endfilter"}, found, where, "filter");
    expect_close_stmt("endfilter");
    return s;
  }

  // --- expressions, lowest precedence first ---

  static ExprPtr make_expr(Expr::Kind kind, Location where) {
    auto e = std::make_unique<Expr>();
    e->kind = kind;
    e->where = where;
    return e;
  }

  ExprPtr parse_tuple_or_expression() {
    const Location where = peek().where;
    ExprPtr first = parse_expression();
    if (!is_op(",")) return first;
    auto tuple = make_expr(Expr::Kind::kTuple, where);
    tuple->items.push_back(std::move(first));
    while (is_op(",")) {
      next();
      if (peek().kind == TokenKind::kCloseStmt || is_op(")")) break;
      tuple->items.push_back(parse_expression());
    }
    return tuple;
  }

  ExprPtr parse_expression() {
    NestingGuard guard(*this, peek().where);
    ExprPtr value = parse_or();
    if (!is_name("if")) return value;
    auto e = make_expr(Expr::Kind::kCondition, peek().where);
    next();
    e->a = std::move(value);
    e->b = parse_or();
    if (is_name("else")) {
      next();
      e->c = parse_expression();
    }
    return e;
  }

  ExprPtr parse_or() {
    ExprPtr left = parse_and();
    while (is_name("or")) {
      auto e = make_expr(Expr::Kind::kOr, next().where);
      e->a = std::move(left);
      e->b = parse_and();
      left = std::move(e);
    }
    return left;
  }

  ExprPtr parse_and() {
    ExprPtr left = parse_not();
    while (is_name("and")) {
      auto e = make_expr(Expr::Kind::kAnd, next().where);
      e->a = std::move(left);
      e->b = parse_not();
      left = std::move(e);
    }
    return left;
  }

  ExprPtr parse_not() {
    NestingGuard guard(*this, peek().where);
    if (is_name("not")) {
      auto e = make_expr(Expr::Kind::kUnary, next().where);
      e->name = "not";
      e->a = parse_not();
      return e;
    }
    return parse_compare();
  }

  ExprPtr parse_compare() {
    ExprPtr left = parse_additive();
    while (true) {
      std::string op;
      const Location where = peek().where;
      if (is_name("not") && is_name("in", 1)) {
        next();
        next();
        op = "not in";
      } else if (is_name("in")) {
        next();
        op = "in";
      } else if (peek().kind == TokenKind::kOp && one_of(peek().text, {"==", "!=", "<", ">", "<=", ">="})) {
        op = next().text;
      } else {
        return left;
      }
      auto e = make_expr(Expr::Kind::kBinary, where);
      e->name = op;
      e->a = std::move(left);
      e->b = parse_additive();
      left = std::move(e);
    }
  }

  ExprPtr parse_binary_level(std::initializer_list<std::string_view> ops, ExprPtr (Parser::*operand)()) {
    ExprPtr left = (this->*operand)();
    while (peek().kind == TokenKind::kOp && one_of(peek().text, ops)) {
      auto e = make_expr(Expr::Kind::kBinary, peek().where);
      e->name = next().text;
      e->a = std::move(left);
      e->b = (this->*operand)();
      left = std::move(e);
    }
    return left;
  }
  ExprPtr parse_additive() { return parse_binary_level({"+", "-", "~"}, &Parser::parse_multiplicative); }
  ExprPtr parse_multiplicative() { return parse_binary_level({"*", "/", "//", "%"}, &Parser::parse_power); }
  ExprPtr parse_power() { return parse_binary_level({"**"}, &Parser::parse_test); }

  // Can the token start the single unparenthesised argument of a test (`is divisibleby 3`)?
  bool starts_test_argument() const {
    const Token& tok = peek();
    switch (tok.kind) {
      case TokenKind::kInt:
      case TokenKind::kFloat:
      case TokenKind::kString:
        return true;
      case TokenKind::kName:
        return !one_of(tok.text, {"and", "or", "else", "if", "not", "is", "in", "recursive"});
      case TokenKind::kOp:
        return tok.text == "[" || tok.text == "{";
      default:
        return false;
    }
  }

  ExprPtr parse_test() {
    ExprPtr operand = parse_filter();
    while (is_name("is")) {
      auto e = make_expr(Expr::Kind::kTest, next().where);
      if (is_name("not")) {
        next();
        e->negate = true;
      }
      const Token& name = peek();
      if (name.kind != TokenKind::kName)
        fail_at(name.where, "expected a test name after 'is', got ", describe(name));
      e->where = name.where;  // errors name the test
      e->name = next().text;
      if (is_op("(")) {
        parse_call_args(*e);
      } else if (starts_test_argument()) {
        e->items.push_back(parse_postfix());
      }
      e->a = std::move(operand);
      operand = std::move(e);
    }
    return operand;
  }

  // `name` or `name(args)` of a filter, applied to `operand`.
  ExprPtr parse_filter_call(ExprPtr operand) {
    const Token& name = peek();
    if (name.kind != TokenKind::kName) fail_at(name.where, "expected a filter name, got ", describe(name));
    auto e = make_expr(Expr::Kind::kFilter, name.where);
    e->name = next().text;
    if (is_op("(")) parse_call_args(*e);
    e->a = std::move(operand);
    return e;
  }

  ExprPtr parse_filter() {
    ExprPtr operand = parse_unary();
    while (is_op("|")) {
      next();
      operand = parse_filter_call(std::move(operand));
    }
    return operand;
  }

  ExprPtr parse_unary() {
    NestingGuard guard(*this, peek().where);
    if (is_op("-") || is_op("+")) {
      const Token& op = next();
      ExprPtr arg = parse_unary();
      if (op.text == "-" && arg->kind == Expr::Kind::kLiteral && arg->literal.is_number()) {
        arg->literal =
            arg->literal.is_int() ? Value(-arg->literal.as_int()) : Value(-arg->literal.as_float());
        arg->where = op.where;
        return arg;
      }
      auto e = make_expr(Expr::Kind::kUnary, op.where);
      e->name = op.text;
      e->a = std::move(arg);
      return e;
    }
    return parse_postfix();
  }

  // Arguments of a call, filter or test, from '(' to ')': positional, then name=value.
  void parse_call_args(Expr& e) {
    expect_op("(", "to open the arguments");
    while (!is_op(")")) {
      if (is_op("*") || is_op("**"))
        fail_at(peek().where, "unsupported: argument unpacking ('", peek().text, "')");
      if (peek().kind == TokenKind::kName && is_op("=", 1)) {
        std::string key = next().text;
        next();
        for (const auto& [k, v] : e.kwargs) {
          if (k == key) fail_at(peek().where, "keyword argument '", key, "' given twice");
        }
        e.kwargs.emplace_back(std::move(key), parse_expression());
      } else {
        if (!e.kwargs.empty()) fail_at(peek().where, "positional argument after keyword arguments");
        e.items.push_back(parse_expression());
      }
      if (!is_op(",")) break;
      next();
    }
    expect_op(")", "to close the arguments");
  }

  ExprPtr parse_postfix() {
    ExprPtr e = parse_primary();
    while (true) {
      if (is_op(".")) {
        const Location where = next().where;
        const Token& name = peek();
        if (name.kind == TokenKind::kInt) {
          auto sub = make_expr(Expr::Kind::kSubscript, where);
          sub->a = std::move(e);
          sub->b = make_expr(Expr::Kind::kLiteral, name.where);
          sub->b->literal = parse_int(name);
          next();
          e = std::move(sub);
          continue;
        }
        if (name.kind != TokenKind::kName)
          fail_at(name.where, "expected an attribute name after '.', got ", describe(name));
        auto attr = make_expr(Expr::Kind::kAttr, where);
        attr->a = std::move(e);
        attr->name = next().text;
        e = std::move(attr);
      } else if (is_op("[")) {
        const Location where = next().where;
        auto sub = make_expr(Expr::Kind::kSubscript, where);
        sub->a = std::move(e);
        if (!is_op(":")) sub->b = parse_expression();
        if (is_op(":")) {
          next();
          sub->kind = Expr::Kind::kSlice;
          if (!is_op(":") && !is_op("]")) sub->c = parse_expression();
          if (is_op(":")) {
            next();
            if (!is_op("]")) sub->d = parse_expression();
          }
        }
        if (!sub->b && sub->kind == Expr::Kind::kSubscript) fail_at(where, "empty subscript '[]'");
        expect_op("]", "to close the subscript");
        e = std::move(sub);
      } else if (is_op("(")) {
        auto call = make_expr(Expr::Kind::kCall, e->where);  // located where the callee starts
        call->a = std::move(e);
        parse_call_args(*call);
        e = std::move(call);
      } else {
        return e;
      }
    }
  }

  static Value parse_int(const Token& tok) {
    int64_t v = 0;
    const auto r = std::from_chars(tok.text.data(), tok.text.data() + tok.text.size(), v);
    if (r.ec != std::errc()) fail_at(tok.where, "integer literal '", tok.text, "' out of range");
    return Value(v);
  }

  ExprPtr parse_primary() {
    const Token& tok = peek();
    const Location where = tok.where;
    switch (tok.kind) {
      case TokenKind::kInt: {
        auto e = make_expr(Expr::Kind::kLiteral, where);
        e->literal = parse_int(tok);
        next();
        return e;
      }
      case TokenKind::kFloat: {
        auto e = make_expr(Expr::Kind::kLiteral, where);
        e->literal = Value(std::strtod(tok.text.c_str(), nullptr));
        next();
        return e;
      }
      case TokenKind::kString: {
        auto e = make_expr(Expr::Kind::kLiteral, where);
        std::string s = next().text;
        while (peek().kind == TokenKind::kString) s += next().text;  // adjacent literals join
        e->literal = Value(std::move(s));
        return e;
      }
      case TokenKind::kName: {
        const std::string& n = tok.text;
        auto e = make_expr(Expr::Kind::kLiteral, where);
        if (n == "true" || n == "True") {
          e->literal = Value(true);
        } else if (n == "false" || n == "False") {
          e->literal = Value(false);
        } else if (n == "none" || n == "None") {
          e->literal = Value(None{});
        } else {
          e->kind = Expr::Kind::kName;
          e->name = n;
        }
        next();
        return e;
      }
      case TokenKind::kOp:
        if (tok.text == "(") {
          next();
          if (is_op(")")) {
            next();
            return make_expr(Expr::Kind::kTuple, where);
          }
          ExprPtr inner = parse_expression();
          if (is_op(",")) {
            auto tuple = make_expr(Expr::Kind::kTuple, where);
            tuple->items.push_back(std::move(inner));
            while (is_op(",")) {
              next();
              if (is_op(")")) break;
              tuple->items.push_back(parse_expression());
            }
            inner = std::move(tuple);
          }
          expect_op(")", "to close the parenthesis");
          return inner;
        }
        if (tok.text == "[") {
          next();
          auto list = make_expr(Expr::Kind::kList, where);
          while (!is_op("]")) {
            list->items.push_back(parse_expression());
            if (!is_op(",")) break;
            next();
          }
          expect_op("]", "to close the list");
          return list;
        }
        if (tok.text == "{") {
          next();
          auto dict = make_expr(Expr::Kind::kDict, where);
          while (!is_op("}")) {
            dict->items.push_back(parse_expression());
            expect_op(":", "between a key and its value");
            dict->items.push_back(parse_expression());
            if (!is_op(",")) break;
            next();
          }
          expect_op("}", "to close the dict");
          return dict;
        }
        break;
      default:
        break;
    }
    fail_at(where, "unexpected ", describe(tok), " in an expression");
  }

  std::vector<Token> t_;
  size_t pos_ = 0;
  int loop_depth_ = 0;
  int nesting_ = 0;
};

}  // namespace

Body parse_template(std::string_view source) {
  Body body = Parser(tokenize(source)).run();
  check_names(body);
  return body;
}

}  // namespace kiln::jinja
