// Router: which handler answers a method and a path. Built before the server starts, read-only
// afterwards (then safe from any thread).
//
//   Router r;
//   r.post("/v1/completions", [](const Request& req, Exchange& ex) { ex.respond({...}); });
//   r.get("/health", health, {.dispatch = Dispatch::Inline});
//
// Paths match exactly (no patterns; the query is not part of the path). A GET route answers HEAD
// too (the body is not sent). A known path asked with another method gets 405 with Allow; an
// unknown path 404 (both through HttpOptions::error_response). OPTIONS is CORS's preflight and is
// answered by the server itself.
//
// Dispatch: Worker handlers run on the server's worker threads and may block (wait for the
// engine, tokenize a long prompt). Inline handlers run on the I/O thread, before anything else
// of any connection: only for answers that take microseconds and never wait (health checks).
//
// The guard runs on the I/O thread once a request's head is in, before its body is read (so a
// refused upload is not read at all): returning a Response answers the request with it. It must
// not block (API key checks).
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "serve/http/exchange.h"
#include "serve/http/message.h"

namespace kiln::serve::http {

enum class Dispatch : uint8_t { Worker, Inline };

struct RouteOptions {
  Dispatch dispatch = Dispatch::Worker;
};

using Handler = std::function<void(const Request&, Exchange&)>;
using Guard = std::function<std::optional<Response>(const Request& head)>;

class Router {
 public:
  struct Route {
    std::string method, path;
    Handler handler;
    RouteOptions options;
  };
  // The outcome of a lookup: the route, or why there is none.
  struct Match {
    const Route* route = nullptr;  // null: no route for this method and path
    bool path_known = false;       // the path has routes for other methods (405, not 404)
    std::string allow;             // those methods ("GET, HEAD, OPTIONS"), for 405's Allow header
  };

  void get(std::string path, Handler handler, RouteOptions options = {});
  void post(std::string path, Handler handler, RouteOptions options = {});
  void set_guard(Guard guard) { guard_ = std::move(guard); }

  // HEAD finds the GET route.
  Match find(std::string_view method, std::string_view path) const;
  const Guard& guard() const { return guard_; }

 private:
  void add(std::string method, std::string path, Handler handler, RouteOptions options);

  std::vector<Route> routes_;
  Guard guard_;
};

}  // namespace kiln::serve::http
