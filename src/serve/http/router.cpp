#include "serve/http/router.h"

#include "core/check.h"

namespace kiln::serve::http {

void Router::add(std::string method, std::string path, Handler handler, RouteOptions options) {
  for (const Route& r : routes_)
    KILN_ASSERT(r.method != method || r.path != path, "Router: a route registered twice");
  routes_.push_back(Route{std::move(method), std::move(path), std::move(handler), options});
}

void Router::get(std::string path, Handler handler, RouteOptions options) {
  add("GET", std::move(path), std::move(handler), options);
}

void Router::post(std::string path, Handler handler, RouteOptions options) {
  add("POST", std::move(path), std::move(handler), options);
}

Router::Match Router::find(std::string_view method, std::string_view path) const {
  Match m;
  const std::string_view wanted = method == "HEAD" ? std::string_view("GET") : method;
  for (const Route& r : routes_) {
    if (r.path != path) continue;
    m.path_known = true;
    if (r.method == wanted) m.route = &r;
    m.allow += (m.allow.empty() ? "" : ", ") + r.method;
    if (r.method == "GET") m.allow += ", HEAD";
  }
  if (m.path_known) m.allow += ", OPTIONS";
  return m;
}

}  // namespace kiln::serve::http
