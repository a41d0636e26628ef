// HttpServer: kiln's HTTP/1.1 server. One I/O thread serves every connection with non-blocking
// sockets (Boost.Asio; its headers stay in http_server.cpp); requests are parsed strictly
// (request_parser.h) and handed to their route (router.h) on a WorkerPool, whose answers the I/O
// thread writes (exchange.h). A connection costs no thread: idle, slow and stalled clients cost
// a socket and a few hundred bytes until a deadline drops them.
//
// Per connection, one request at a time (pipelined requests wait in the input, up to a bound, and
// are answered in order). Deadlines:
//   head_timeout  a request's head must be complete this long after the connection opened or its
//                 previous answer was written (408, or a silent close when nothing arrived)
//   io_timeout    the body must be complete this long after the head (408); an answer whose
//                 bytes the client does not take for this long is dropped (client_gone)
// Limits: RequestLimits (head size, header count, body size; 431, 413 before the body is read).
// Expect: 100-continue is answered once the request passed its route lookup and the guard. CORS:
// with cors_origins set, answers carry Access-Control-Allow-Origin for allowed origins and OPTIONS
// is answered as a preflight (no guard: browsers send no credentials there).
// Out of descriptors (EMFILE) the server stops accepting for a moment instead of spinning.
//
// Thread-safety: listen() and stop() from one controlling thread.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "core/result.h"
#include "serve/http/message.h"
#include "serve/http/request_parser.h"
#include "serve/http/router.h"

namespace kiln::serve::http {

struct HttpOptions {
  RequestLimits limits;
  std::chrono::milliseconds head_timeout{10'000};
  std::chrono::milliseconds io_timeout{3'600'000};  // --timeout
  bool reuse_port = false;                          // SO_REUSEPORT (--reuse-port)
  // "*", or a comma-separated list of origins ("https://a.example, http://localhost:3000");
  // empty: no CORS headers and OPTIONS answers without them.
  std::string cors_origins = "*";
  size_t max_workers = 64;  // handler threads
  // The answer to requests the layer refuses itself (400, 404, 405, 408, 411, 413, 417, 431, 501,
  // 505...). Default: the message as text/plain. Called on the I/O thread.
  std::function<Response(int status, std::string_view message)> error_response;
  // Operator messages ("out of file descriptors: ..."), from the I/O thread; empty: quiet.
  std::function<void(const std::string&)> log;
};

class HttpServer {
 public:
  HttpServer(Router router, HttpOptions options);
  ~HttpServer();  // stop(0)
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Binds host:port (port 0: a free one), listens, and serves on background threads; the bound
  // port. Errors name the address and the reason ("address already in use").
  Result<int> listen(const std::string& host, int port);
  // Stops accepting and closes idle connections at once; answers in progress get `grace` to
  // finish, then every connection is closed (their handlers see client_gone). Returns once the
  // I/O thread and every handler returned. Idempotent.
  void stop(std::chrono::milliseconds grace);

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace kiln::serve::http
