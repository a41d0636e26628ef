#include "serve/http/request_parser.h"

#include <boost/beast/http/basic_parser.hpp>
#include <boost/beast/http/error.hpp>
#include <cctype>

namespace kiln::serve::http {
namespace {

namespace beast_http = boost::beast::http;
using boost::beast::error_code;
using boost::beast::string_view;

constexpr std::string_view kHeadEnd = "\r\n\r\n";

bool is_body_method(std::string_view method) {
  return method == "POST" || method == "PUT" || method == "PATCH";
}

// The comma-separated tokens of a header value, trimmed of spaces and tabs (empty ones dropped).
std::vector<std::string_view> tokens(std::string_view value) {
  std::vector<std::string_view> out;
  size_t at = 0;
  while (at <= value.size()) {
    size_t end = value.find(',', at);
    if (end == std::string_view::npos) end = value.size();
    std::string_view t = value.substr(at, end - at);
    while (!t.empty() && (t.front() == ' ' || t.front() == '\t')) t.remove_prefix(1);
    while (!t.empty() && (t.back() == ' ' || t.back() == '\t')) t.remove_suffix(1);
    if (!t.empty()) out.push_back(t);
    at = end + 1;
  }
  return out;
}

// Line-level checks Beast does not make: every LF ends a CRLF, no obs-fold (a line starting with
// a space or tab), at most max_lines lines. `head` ends with the blank line. Empty: it is fine.
std::optional<RequestError> check_lines(std::string_view head, size_t max_lines) {
  size_t lines = 0;
  for (size_t i = 0; i < head.size(); ++i) {
    if (head[i] != '\n') continue;
    if (i == 0 || head[i - 1] != '\r')
      return RequestError{400, "a line of the request head ends with a bare LF"};
    if (i + 1 < head.size() && (head[i + 1] == ' ' || head[i + 1] == '\t'))
      return RequestError{400, "folded header lines (obs-fold) are not accepted"};
    if (++lines > max_lines + 2)  // the request line and the blank line
      return RequestError{431, "more than " + std::to_string(max_lines) + " header fields"};
  }
  return std::nullopt;
}

// How Beast's parser errors are answered.
RequestError beast_error(const error_code& ec) {
  using E = beast_http::error;
  if (ec == E::header_limit) return {431, "the request head is too large"};
  if (ec == E::bad_content_length) return {400, "invalid or conflicting Content-Length"};
  if (ec == E::bad_transfer_encoding)
    return {400, "invalid Transfer-Encoding (or together with Content-Length)"};
  if (ec == E::bad_version) return {400, "malformed HTTP version"};
  if (ec == E::bad_method) return {400, "malformed request method"};
  if (ec == E::bad_target) return {400, "malformed request target"};
  if (ec == E::bad_field) return {400, "malformed header field name (or a line without a colon)"};
  if (ec == E::bad_value) return {400, "malformed header field value"};
  if (ec == E::bad_line_ending) return {400, "malformed line ending"};
  if (ec == E::bad_chunk || ec == E::bad_chunk_extension) return {400, "malformed chunked body"};
  if (ec == E::partial_message) return {400, "the request ended before it was complete"};
  return {400, "malformed request: " + ec.message()};
}

}  // namespace

// Beast's parser with kiln's callbacks: the request line, fields and body go into a Request.
struct RequestParser::Beast final : beast_http::basic_parser<true> {
  Request* request = nullptr;
  size_t max_fields = 0;
  size_t n_fields = 0;
  bool too_many_fields = false;

  void on_request_impl(beast_http::verb, string_view method, string_view target, int version,
                       error_code&) override {
    request->method.assign(method.data(), method.size());
    request->target.assign(target.data(), target.size());
    request->version = version;
  }
  void on_response_impl(int, string_view, int, error_code& ec) override {
    ec = beast_http::error::bad_version;
  }
  void on_field_impl(beast_http::field, string_view name, string_view value, error_code& ec) override {
    if (++n_fields > max_fields) {
      too_many_fields = true;
      ec = beast_http::error::header_limit;
      return;
    }
    if (is_header_done()) return;  // a trailer field of a chunked body: counted, not kept
    request->headers.push_back(
        {std::string(name.data(), name.size()), std::string(value.data(), value.size())});
  }
  void on_header_impl(error_code&) override {}
  void on_body_init_impl(const boost::optional<std::uint64_t>&, error_code&) override {}
  size_t on_body_impl(string_view body, error_code&) override {
    request->body.append(body.data(), body.size());
    return body.size();
  }
  void on_chunk_header_impl(std::uint64_t, string_view, error_code&) override {}
  size_t on_chunk_body_impl(std::uint64_t, string_view body, error_code&) override {
    request->body.append(body.data(), body.size());
    return body.size();
  }
  void on_finish_impl(error_code&) override {}
};

RequestParser::RequestParser(RequestLimits limits) : limits_(limits) { reset(); }

RequestParser::~RequestParser() = default;

void RequestParser::reset() {
  beast_ = std::make_unique<Beast>();
  beast_->request = &request_;
  beast_->max_fields = limits_.max_headers;
  beast_->header_limit(static_cast<std::uint32_t>(limits_.max_head));
  beast_->body_limit(limits_.max_body);
  state_ = State::Head;
  error_ = {};
  request_ = {};
  scanned_ = 0;
  started_ = false;
  keep_alive_ = expects_continue_ = has_body_ = false;
  content_length_.reset();
}

void RequestParser::fail_parse(const boost::system::error_code& ec, std::string_view head) {
  if (beast_->too_many_fields)
    return fail(431, "more than " + std::to_string(limits_.max_headers) + " header fields");
  if (ec == beast_http::error::body_limit)
    return fail(
        413, "the request body is larger than the limit of " + std::to_string(limits_.max_body) + " bytes");
  // A well-formed version Beast does not parse ("HTTP/2.0") is one this server does not speak.
  const std::string_view line = head.substr(0, head.find("\r\n"));
  if (ec == beast_http::error::bad_version && line.size() > 8) {
    const std::string_view v = line.substr(line.size() - 8);
    if (v.substr(0, 5) == "HTTP/" && std::isdigit(static_cast<unsigned char>(v[5])) && v[6] == '.' &&
        std::isdigit(static_cast<unsigned char>(v[7])))
      return fail(505, "only HTTP/1.0 and HTTP/1.1 are served");
  }
  RequestError e = ec ? beast_error(ec) : RequestError{400, "malformed request head"};
  fail(e.status, std::move(e.message));
}

void RequestParser::fail(int status, std::string message) {
  state_ = State::Failed;
  error_ = {status, std::move(message)};
}

size_t RequestParser::feed(std::string_view input) {
  if (state_ == State::Head) return feed_head(input);
  if (state_ == State::Body) return feed_body(input);
  return 0;
}

size_t RequestParser::feed_head(std::string_view input) {
  // Blank lines before a request line are skipped (RFC 9112 section 2.2).
  size_t skipped = 0;
  if (!started_) {
    while (input.substr(skipped, 2) == "\r\n") skipped += 2;
    if (skipped > 0) scanned_ = 0;
  }
  const std::string_view rest = input.substr(skipped);
  if (!rest.empty()) started_ = true;
  // The head is parsed once all of it is here; scanned_ remembers how far the search went.
  const size_t from = scanned_ >= kHeadEnd.size() ? scanned_ - (kHeadEnd.size() - 1) : 0;
  const size_t end = rest.find(kHeadEnd, from);
  if (end == std::string_view::npos) {
    scanned_ = rest.size();
    if (rest.size() > limits_.max_head)
      fail(431, "the request head is larger than " + std::to_string(limits_.max_head) + " bytes");
    return skipped;
  }
  const size_t head_size = end + kHeadEnd.size();
  if (head_size > limits_.max_head) {
    fail(431, "the request head is larger than " + std::to_string(limits_.max_head) + " bytes");
    return skipped;
  }
  const std::string_view head = rest.substr(0, head_size);
  if (auto e = check_lines(head, limits_.max_headers)) {
    fail(e->status, std::move(e->message));
    return skipped;
  }
  error_code ec;
  const size_t n = beast_->put(boost::asio::const_buffer(head.data(), head.size()), ec);
  if (ec || !beast_->is_header_done() || n != head.size()) {
    fail_parse(ec, head);
    return skipped;
  }
  check_head();
  return skipped + head_size;
}

void RequestParser::check_head() {
  Request& r = request_;
  if (r.version != 10 && r.version != 11) return fail(505, "only HTTP/1.0 and HTTP/1.1 are served");
  // The target: origin-form (a path), absolute-form (a proxy's "http://host/path"), or "*".
  std::string_view target = r.target;
  if (target.rfind("http://", 0) == 0 || target.rfind("https://", 0) == 0) {
    const size_t authority = target.find("//") + 2;
    const size_t slash = target.find('/', authority);
    target = slash == std::string_view::npos ? std::string_view("/") : target.substr(slash);
  }
  if (target == "*") {
    if (r.method != "OPTIONS") return fail(400, "the request target '*' is only valid for OPTIONS");
    r.path = "*";
  } else {
    if (target.empty() || target.front() != '/') return fail(400, "the request target must be a path");
    const size_t q = target.find('?');
    r.path = std::string(target.substr(0, q));
    if (q != std::string_view::npos) r.query = std::string(target.substr(q + 1));
  }
  // Exactly one Host for HTTP/1.1 (RFC 9112 section 3.2).
  size_t n_host = 0;
  std::vector<std::string_view> codings;
  size_t n_te = 0;
  std::optional<std::string_view> expect;
  for (const Header& h : r.headers) {
    if (iequals(h.name, "host")) ++n_host;
    if (iequals(h.name, "transfer-encoding")) {
      ++n_te;
      for (std::string_view t : tokens(h.value)) codings.push_back(t);
    }
    if (iequals(h.name, "expect")) {
      if (expect) return fail(400, "more than one Expect header");
      expect = h.value;
    }
  }
  if (r.version == 11 && n_host != 1)
    return fail(400, n_host == 0 ? "an HTTP/1.1 request needs a Host header" : "more than one Host header");
  if (n_te > 0) {
    // Only "chunked", alone: anything else lets a proxy and this server disagree on where the
    // body ends (RFC 9112 section 6.1).
    if (r.version == 10) return fail(400, "Transfer-Encoding in an HTTP/1.0 request");
    if (codings.empty() || !iequals(codings.back(), "chunked"))
      return fail(400, "Transfer-Encoding must end with chunked");
    if (codings.size() > 1 || n_te > 1)
      return fail(501, "Transfer-Encoding other than chunked is not supported");
  }
  if (expect) {
    if (!iequals(*expect, "100-continue")) return fail(417, "only 'Expect: 100-continue' is supported");
    expects_continue_ = r.version == 11;
  }
  const bool chunked = beast_->chunked();
  if (const auto cl = beast_->content_length()) content_length_ = *cl;
  if (!chunked && !content_length_ && is_body_method(r.method))
    return fail(411, "a " + r.method + " request needs a Content-Length (or a chunked body)");
  if (content_length_ && *content_length_ > limits_.max_body)
    return fail(413, "the request body of " + std::to_string(*content_length_) +
                         " bytes is larger than the limit of " + std::to_string(limits_.max_body) + " bytes");
  keep_alive_ = beast_->keep_alive();
  has_body_ = chunked || content_length_.value_or(0) > 0;
  if (!has_body_) {
    expects_continue_ = false;
    state_ = State::Done;
    return;
  }
  state_ = State::Body;
  beast_->eager(true);
}

size_t RequestParser::feed_body(std::string_view input) {
  if (input.empty()) return 0;
  error_code ec;
  const size_t n = beast_->put(boost::asio::const_buffer(input.data(), input.size()), ec);
  if (ec == beast_http::error::need_more) ec = {};
  if (ec) {
    fail_parse(ec, {});
    return n;
  }
  if (beast_->is_done()) state_ = State::Done;
  return n;
}

void RequestParser::end_of_input() {
  if (state_ == State::Done || state_ == State::Failed) return;
  if (state_ == State::Head && !started_) return;
  fail(400, "the connection closed before the request was complete");
}

}  // namespace kiln::serve::http
