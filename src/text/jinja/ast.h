// Syntax tree of a template. Built by the parser, read-only afterwards; a Template owns it.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "text/jinja/error.h"
#include "text/jinja/value.h"

namespace kiln::jinja {

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

struct Expr {
  enum class Kind {
    kLiteral,    // value
    kName,       // name
    kList,       // [items...]
    kTuple,      // (items...)
    kDict,       // {items[0]: items[1], ...} (keys and values alternate)
    kUnary,      // name (op: "-", "+", "not") applied to a
    kBinary,     // a name b (op: arithmetic, comparison, "in", "not in", "~")
    kAnd,        // a and b
    kOr,         // a or b
    kCondition,  // a if b else c (c null: undefined when b is false)
    kAttr,       // a.name
    kSubscript,  // a[b]
    kSlice,      // a[b:c:d] (any of b, c, d may be null)
    kCall,       // a(items..., kwargs...)
    kFilter,     // a | name(items..., kwargs...)   (a null: the body of a filter block)
    kTest,       // a is [not] name(items...)
  };

  Kind kind;
  Location where;
  Value literal;
  std::string name;
  std::vector<ExprPtr> items;
  std::vector<std::pair<std::string, ExprPtr>> kwargs;
  ExprPtr a, b, c, d;
  bool negate = false;  // kTest: `is not`
};

struct Stmt;
using StmtPtr = std::unique_ptr<Stmt>;
using Body = std::vector<StmtPtr>;

// A macro parameter, with its default (null when it has none).
struct Param {
  std::string name;
  ExprPtr default_value;
};

struct Stmt {
  enum class Kind {
    kText,         // text
    kOutput,       // {{ expr }}
    kIf,           // if expr: body, else: else_body (an elif is an If inside else_body)
    kFor,          // for targets in expr [if cond]: body, else: else_body
    kSet,          // set targets = expr, or set target.attr = expr (attr non-empty)
    kSetBlock,     // set targets[0] %} body {% endset
    kMacro,        // macro name(params): body
    kCallBlock,    // call(params) expr: body (expr is the kCall of the macro)
    kFilterBlock,  // filter expr (a kFilter with no operand): body
    kBreak,
    kContinue,
  };

  Kind kind;
  Location where;
  std::string text;  // kText; kMacro: the name
  ExprPtr expr;
  ExprPtr cond;                      // kFor: the `if` clause
  std::vector<std::string> targets;  // kFor/kSet/kSetBlock: assigned names (several: unpacking)
  std::string attr;                  // kSet: `set targets[0].attr = ...`
  std::vector<Param> params;         // kMacro, kCallBlock
  Body body;
  Body else_body;
};

}  // namespace kiln::jinja
