// HTTP messages as route handlers see them: a parsed, validated request and a complete response.
// Plain values, no I/O and no HTTP library types: the HTTP layer (http_server.h) fills Requests
// from the wire (request_parser.h) and writes Responses to it (wire.h).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kiln::serve::http {

struct Header {
  std::string name;  // as received, or as it will be sent
  std::string value;
};
using Headers = std::vector<Header>;

// ASCII case-insensitive equality (header names, tokens).
bool iequals(std::string_view a, std::string_view b);

// The value of the first header called `name` (case-insensitive); nullopt when there is none.
std::optional<std::string_view> find_header(const Headers& headers, std::string_view name);

struct Request {
  std::string method;  // as sent (case-sensitive): "GET", "POST", "HEAD", "OPTIONS", ...
  std::string target;  // the request-target as sent
  std::string path;    // the target's path ("/v1/models"; "*" for "OPTIONS *")
  std::string query;   // what follows '?', without it; empty when none
  int version = 11;    // 10 (HTTP/1.0) or 11 (HTTP/1.1)
  Headers headers;     // in the order received; names as sent
  std::string body;    // complete, chunked bodies decoded

  // The value of the first header called `name` (case-insensitive); empty when absent.
  std::string_view header(std::string_view name) const;
};

// A complete answer. The layer adds the framing headers (Content-Length or Transfer-Encoding,
// Connection) and CORS headers itself; `headers` holds the others (Retry-After, Cache-Control...).
struct Response {
  int status = 200;
  std::string content_type;  // empty: no Content-Type header
  std::string body;
  Headers headers;
};

// The reason phrase of a status code ("Not Found"); "Unknown" for codes it does not know.
std::string_view reason_phrase(int status);

}  // namespace kiln::serve::http
