// RequestParser: a strict, incremental HTTP/1.1 request parser. Boost.Beast's parser reads the
// grammar (request line, field syntax, Content-Length and chunked framing, its conflicts); kiln
// adds what Beast lets through and a server must refuse (request smuggling behind a proxy, floods):
//   - obsolete line folding, bare LF line ends, more than limits.max_headers header lines (400/431)
//   - HTTP/1.1 without exactly one Host (400); versions other than 1.0 and 1.1 (505)
//   - a Transfer-Encoding other than exactly "chunked" (501, or 400 when chunked is not last)
//   - a body-carrying method (POST, PUT, PATCH) with neither Content-Length nor chunked (411)
//   - an Expect other than 100-continue (417); a Content-Length over limits.max_body (413)
//   - a target that is neither a path nor an absolute URI (400)
// Beast already refuses conflicting Content-Lengths, Content-Length with Transfer-Encoding,
// malformed lengths (negative, overflowing), header lines without a colon and bytes that are not
// allowed in names or values.
//
// Use: feed() the connection's unconsumed input; it returns how many bytes it used (the rest is
// the next part, or the next pipelined request). The head is parsed only once all of it is there
// (so feed() may use nothing until "\r\n\r\n" arrives), and feed() stops after it: state() is
// then Body (the caller decides whether to read the body: 100-continue, early refusals) or Done
// when there is no body. Feeding in state Body reads body bytes until Done. Failed: error() says
// what to answer; the connection must then be closed. reset() starts the next request.
//
// Heavy headers (Beast) stay in request_parser.cpp. Not thread-safe; one per connection.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "serve/http/message.h"

namespace boost::system {
class error_code;
}

namespace kiln::serve::http {

struct RequestLimits {
  size_t max_head = 32 << 10;  // request line and header lines, bytes (431 beyond)
  size_t max_headers = 100;    // header lines (431 beyond)
  size_t max_body = 16 << 20;  // body bytes (413 beyond)
};

// What to answer to a request that cannot be served, and why.
struct RequestError {
  int status = 400;
  std::string message;
};

class RequestParser {
 public:
  enum class State : uint8_t {
    Head,    // waiting for the whole head
    Body,    // head parsed; the body follows
    Done,    // a complete request
    Failed,  // error() says why; the connection cannot be reused
  };

  explicit RequestParser(RequestLimits limits = {});
  ~RequestParser();
  RequestParser(const RequestParser&) = delete;
  RequestParser& operator=(const RequestParser&) = delete;

  // Parses from the start of `input` (everything received and not yet consumed): the head, or
  // body bytes; the number of bytes used. Does nothing in states Done and Failed.
  size_t feed(std::string_view input);
  // The input ended (the peer closed its side). A request cut short fails with 400; in state
  // Head with nothing received, the state stays Head (a clean end between requests).
  void end_of_input();
  // Forgets the request, ready for the next one on the same connection.
  void reset();

  State state() const { return state_; }
  // True once bytes of the current request (not only blank lines) were consumed.
  bool started() const { return started_; }
  const RequestError& error() const { return error_; }
  // The request: head fields from state Body on, the body once Done.
  const Request& request() const { return request_; }
  Request take_request() { return std::move(request_); }

  // Valid from state Body on.
  bool keep_alive() const { return keep_alive_; }              // the connection may serve another request
  bool expects_continue() const { return expects_continue_; }  // "Expect: 100-continue"
  bool has_body() const { return has_body_; }                  // a body follows the head
  std::optional<uint64_t> content_length() const { return content_length_; }

 private:
  struct Beast;
  size_t feed_head(std::string_view input);
  size_t feed_body(std::string_view input);
  void check_head();
  void fail(int status, std::string message);
  void fail_parse(const boost::system::error_code& ec, std::string_view head);  // from Beast's error

  RequestLimits limits_;
  std::unique_ptr<Beast> beast_;
  State state_ = State::Head;
  RequestError error_;
  Request request_;
  size_t scanned_ = 0;  // head bytes already searched for the blank line
  bool started_ = false;
  bool keep_alive_ = false, expects_continue_ = false, has_body_ = false;
  std::optional<uint64_t> content_length_;
};

}  // namespace kiln::serve::http
