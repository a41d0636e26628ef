// Exchange: one request and its answer, as a route handler sees them.
//
// A handler (router.h) answers exactly once, either
//   - respond(Response): a complete answer, or
//   - stream(content_type): a body sent piece by piece (chunked transfer coding; with HTTP/1.0,
//     until the connection closes), then write() the pieces; the body ends at end() or when the
//     handler returns.
// A handler that returns without answering is answered 500. Everything is handed to the
// connection's I/O thread; nothing here touches a socket or blocks the I/O thread.
//
// Backpressure: write() blocks while more than kStreamBufferBytes written by the handler wait for
// the client (not yet accepted by the socket), and returns false once the client is gone: it
// closed the connection, or accepted no byte for the server's write timeout (--timeout) and was
// dropped. A handler streaming a generation therefore stops taking its output while the client
// does not read; the engine pauses that generation (Generation's backlog bound), and the handler
// cancels it when write() returns false.
//
// Clients that leave: client_gone() turns true when the client closes its connection (or half-
// closes it after its last request) before the answer is complete, or when the connection is
// dropped (timeout, server stop). on_client_gone() runs a callback at that moment: a long
// non-streaming handler uses it to cancel its work.
//
// Thread-safety: respond, stream, write, end from the handler's thread (one at a time);
// client_gone and on_client_gone from any thread. Callbacks run on the I/O thread, or at once on
// the caller's thread when the client is already gone: they must be short and must not block.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "serve/http/message.h"

namespace kiln::serve::http {

struct ExchangeState;  // shared with the connection (exchange_state.h)

// Stream bytes a handler may have written that the client has not taken, before write() blocks
// (the kernel holds at most as much again: TCP_NOTSENT_LOWAT).
inline constexpr size_t kStreamBufferBytes = 32 << 10;

class Exchange {
 public:
  // For the HTTP layer (and tests of handlers): the exchange over `state`.
  explicit Exchange(std::shared_ptr<ExchangeState> state);
  ~Exchange();
  Exchange(const Exchange&) = delete;
  Exchange& operator=(const Exchange&) = delete;

  const Request& request() const;

  // The complete answer. Ignored after the first answer.
  void respond(Response response);
  // Starts a streamed answer with status 200 (or `status`), `content_type` and `headers`.
  // Ignored after the first answer.
  void stream(std::string content_type, Headers headers = {}, int status = 200);
  // Appends to the streamed body; blocks while the client is kStreamBufferBytes behind. False when
  // the client is gone (nothing more will reach it) or no stream was started.
  bool write(std::string_view bytes);
  // Ends the streamed body (the handler returning does it too).
  void end();

  bool client_gone() const;
  // Runs `fn` once when the client goes (see above); at once if it already has.
  void on_client_gone(std::function<void()> fn);

 private:
  std::shared_ptr<ExchangeState> state_;
};

}  // namespace kiln::serve::http
