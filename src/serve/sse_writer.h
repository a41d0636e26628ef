// Server-sent events of one streaming answer (the completion routes), written through the
// request's Exchange: a write blocks while the client lags behind (see http/exchange.h). After a
// failed write (the client went away) nothing more is written and ok() turns false.
// Not thread-safe: one per stream, on its handler's thread.
#pragma once

#include <string>
#include <string_view>

#include "serve/api_json.h"

namespace kiln::serve {

class SseWriter {
 public:
  // Starts the stream: 200, text/event-stream, not to be cached.
  explicit SseWriter(http::Exchange& ex) : ex_(ex) {
    ex_.stream("text/event-stream", {{"Cache-Control", "no-cache"}});
  }

  // One "data: JSON\n\n" event.
  void event(const json& body) { write(sse_event(body)); }
  // An error event in OpenAI's shape.
  void error(const HttpError& e) { event(error_json(e)); }
  void write(std::string_view text) {
    if (ok_) ok_ = ex_.write(text);
  }
  bool ok() const { return ok_; }

 private:
  http::Exchange& ex_;
  bool ok_ = true;
};

}  // namespace kiln::serve
