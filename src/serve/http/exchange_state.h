// ExchangeState: what a handler's Exchange (exchange.h) and the connection answering it share.
// The handler side writes an answer; the connection side (http_server.cpp, on the I/O thread)
// takes it piece by piece, reports bytes the socket accepted (which releases a blocked write()),
// and reports the client's departure. Only the HTTP layer and tests use this header.
// Thread-safety: every member function may be called from any thread.
#pragma once

#include <condition_variable>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "serve/http/message.h"

namespace kiln::serve::http {

struct ExchangeState {
  // `wake` tells the connection there is output to take (called without locks held, possibly
  // from a handler thread; at most once until the next take()).
  ExchangeState(Request request, std::function<void()> wake);

  // What the connection sends next.
  struct Output {
    std::optional<Response> head;  // the answer's status and headers (with the whole body when
                                   // `complete`); sent first, once
    bool complete = false;         // head carries the whole answer
    bool streamed = false;         // head starts a streamed body
    std::string bytes;             // streamed body bytes, in order
    bool ended = false;            // nothing follows (stream: the body ended)
  };
  Output take();
  // The socket accepted `n` streamed body bytes.
  void sent(size_t n);
  // The client left or the connection is dropped: writes fail from now on; runs the callbacks.
  void client_gone();
  // The handler returned: an unanswered request gets 500, an open stream ends.
  void handler_returned();

  const Request request;

  // Route side (Exchange).
  void respond(Response response);
  void stream(Response head);
  bool write(std::string_view bytes);
  void end();
  bool gone() const;
  void on_gone(std::function<void()> fn);

 private:
  bool should_wake();  // under mutex_: true when wake_ must be called (once until the next take())

  enum class Mode { None, Complete, Stream };
  std::function<void()> wake_;
  mutable std::mutex mutex_;
  std::condition_variable writable_;
  Mode mode_ = Mode::None;
  Response response_;  // the answer (Complete) or the stream's head
  bool head_taken_ = false;
  std::string pending_;  // streamed bytes not taken yet
  size_t unsent_ = 0;    // streamed bytes written by the handler, not yet accepted by the socket
  bool ended_ = false;
  bool gone_ = false;
  bool woken_ = false;  // wake_ was called and take() has not run since
  std::vector<std::function<void()>> on_gone_;
};

}  // namespace kiln::serve::http
