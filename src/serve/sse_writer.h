// Server-sent events of one streaming response (the chunked content providers of the completion
// routes). After a failed write (the client went away) nothing more is written and ok() turns
// false. Not thread-safe: one per content-provider call.
#pragma once

#include <string>
#include <string_view>

#include "serve/api_json.h"
#include "serve/http.h"

namespace kiln::serve {

class SseWriter {
 public:
  explicit SseWriter(httplib::DataSink& sink) : sink_(sink) {}

  // One "data: JSON\n\n" event.
  void event(const json& body) { write(sse_event(body)); }
  // An error event in OpenAI's shape, type server_error, code 500.
  void error(const std::string& message) {
    event({{"error", {{"message", message}, {"type", "server_error"}, {"code", 500}}}});
  }
  void write(std::string_view text) {
    if (ok_) ok_ = sink_.write(text.data(), text.size());
  }
  bool ok() const { return ok_; }

 private:
  httplib::DataSink& sink_;
  bool ok_ = true;
};

}  // namespace kiln::serve
