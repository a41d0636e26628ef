#include "text/jinja/name_check.h"

#include "text/jinja/builtins.h"

namespace kiln::jinja {

namespace {

// `soft`: inside Jinja2's soft frame (an if statement or a conditional expression), where an
// unknown name waits for run time.
void check_expr(const Expr* e, bool soft) {
  if (e == nullptr) return;
  if (e->kind == Expr::Kind::kCondition) soft = true;
  if (!soft && e->kind == Expr::Kind::kFilter && !is_known_filter(e->name)) {
    fail_at(e->where, "unknown filter '", e->name, "'");
  }
  if (!soft && e->kind == Expr::Kind::kTest && !is_known_test(e->name)) {
    fail_at(e->where, "unknown test '", e->name, "'");
  }
  for (const Expr* child : {e->a.get(), e->b.get(), e->c.get(), e->d.get()}) check_expr(child, soft);
  for (const ExprPtr& item : e->items) check_expr(item.get(), soft);
  for (const auto& [name, value] : e->kwargs) check_expr(value.get(), soft);
}

void check_body(const Body& body, bool soft) {
  for (const StmtPtr& s : body) {
    switch (s->kind) {
      case Stmt::Kind::kIf:
        check_expr(s->expr.get(), true);
        check_body(s->body, true);
        check_body(s->else_body, true);
        break;
      case Stmt::Kind::kOutput:
      case Stmt::Kind::kSet:
        check_expr(s->expr.get(), soft);
        break;
      case Stmt::Kind::kFor:  // the iterable is evaluated outside the loop's own frame
        check_expr(s->expr.get(), soft);
        check_expr(s->cond.get(), false);
        check_body(s->body, false);
        check_body(s->else_body, false);
        break;
      case Stmt::Kind::kCallBlock:  // the call outside; the body is a macro
        check_expr(s->expr.get(), soft);
        [[fallthrough]];
      case Stmt::Kind::kMacro:
        for (const Param& p : s->params) check_expr(p.default_value.get(), false);
        check_body(s->body, false);
        break;
      case Stmt::Kind::kFilterBlock:
        check_expr(s->expr.get(), false);
        check_body(s->body, false);
        break;
      case Stmt::Kind::kSetBlock:
        check_body(s->body, false);
        break;
      case Stmt::Kind::kText:
      case Stmt::Kind::kBreak:
      case Stmt::Kind::kContinue:
        break;
    }
  }
}

}  // namespace

void check_names(const Body& body) { check_body(body, false); }

}  // namespace kiln::jinja
