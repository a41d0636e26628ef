// The bytes of HTTP/1.1 responses: status line and headers, and chunked body framing.
// Stateless; safe from any thread.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "serve/http/message.h"

namespace kiln::serve::http {

// How a response's body is delimited.
enum class Framing : uint8_t {
  Length,      // Content-Length: the body that follows has `length` bytes (sent or, for HEAD, not)
  Chunked,     // Transfer-Encoding: chunked (HTTP/1.1 streams)
  UntilClose,  // the body ends when the connection closes (HTTP/1.0 streams)
};

struct HeadOptions {
  Framing framing = Framing::Length;
  uint64_t length = 0;         // Framing::Length
  bool close = false;          // "Connection: close": no request follows on this connection
  bool keep_alive_10 = false;  // an HTTP/1.0 client asked to keep the connection: say we do
  int version = 11;            // the request's HTTP version (the status line answers 1.1 anyway)
};

// "HTTP/1.1 STATUS REASON", Content-Type, the response's headers, `extra` (CORS), the framing
// headers, and the blank line. CR and LF inside names or values are replaced by spaces (no
// header injection through a value).
std::string response_head(const Response& r, const HeadOptions& options, const Headers& extra = {});

// One chunk of a chunked body ("SIZE\r\nBYTES\r\n"); empty for no bytes (an empty chunk would end
// the body).
std::string chunk(std::string_view bytes);
inline constexpr std::string_view kLastChunk = "0\r\n\r\n";

// "HTTP/1.1 100 Continue", sent before reading a body announced with Expect: 100-continue.
inline constexpr std::string_view kContinue = "HTTP/1.1 100 Continue\r\n\r\n";

}  // namespace kiln::serve::http
