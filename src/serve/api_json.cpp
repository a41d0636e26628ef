#include "serve/api_json.h"

#include <sys/random.h>

#include <cerrno>
#include <chrono>

#include "core/check.h"

namespace kiln::serve {
namespace {

const char* error_type(int status) {
  switch (status) {
    case 401:
      return "authentication_error";
    case 404:
      return "not_found_error";
    case 501:
      return "not_supported_error";
    case 503:
      return "unavailable_error";
    case 500:
      return "server_error";
    default:
      return "invalid_request_error";
  }
}

}  // namespace

std::string dump_json(const json& body) { return body.dump(-1, ' ', false, json::error_handler_t::replace); }

json error_json(const HttpError& e) {
  return {{"error", {{"message", e.message}, {"type", error_type(e.status)}, {"code", e.status}}}};
}

http::Response error_response(const HttpError& e) {
  http::Response r{.status = e.status,
                   .content_type = "application/json; charset=utf-8",
                   .body = dump_json(error_json(e)),
                   .headers = {}};
  if (e.status == 503) r.headers.push_back({"Retry-After", "1"});
  return r;
}

http::Response json_response(const json& body) {
  return {.status = 200,
          .content_type = "application/json; charset=utf-8",
          .body = dump_json(body),
          .headers = {}};
}

void send_error(http::Exchange& ex, const HttpError& e) { ex.respond(error_response(e)); }

void send_json(http::Exchange& ex, const json& body) { ex.respond(json_response(body)); }

std::string sse_event(const json& body) { return "data: " + dump_json(body) + "\n\n"; }

bool valid_utf8(const std::string& s) {
  try {
    (void)json(s).dump();
    return true;
  } catch (const json::type_error&) {
    return false;
  }
}

int64_t unix_time() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::string make_id(const char* prefix) {
  unsigned char bytes[16];
  size_t got = 0;
  while (got < sizeof bytes) {
    const ssize_t n = ::getrandom(bytes + got, sizeof bytes - got, 0);
    if (n < 0 && errno == EINTR) continue;
    KILN_ASSERT(n > 0, "getrandom failed: no random bytes for an id");
    got += static_cast<size_t>(n);
  }
  static constexpr char kHex[] = "0123456789abcdef";
  std::string id(prefix);
  for (unsigned char b : bytes) {
    id += kHex[b >> 4];
    id += kHex[b & 15];
  }
  return id;
}

std::optional<HttpError> parse_json_object(std::string_view text, json& out) {
  if (text::json_nests_deeper_than(text, kMaxJsonDepth))
    return HttpError{400, "the request body nests arrays and objects deeper than " +
                              std::to_string(kMaxJsonDepth) + " levels"};
  out = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (out.is_discarded()) return HttpError{400, "the request body is not valid JSON"};
  if (!out.is_object()) return HttpError{400, "the request body must be a JSON object"};
  return std::nullopt;
}

std::optional<json> parse_body(const http::Request& req, http::Exchange& ex) {
  json body;
  if (auto e = parse_json_object(req.body, body)) {
    send_error(ex, *e);
    return std::nullopt;
  }
  return body;
}

std::string field_message(std::string_view key, std::string_view what) {
  return "field '" + std::string(key) + "' " + std::string(what);
}

std::optional<HttpError> read_bool(const json& body, const char* key, bool& out) {
  auto it = body.find(key);
  if (it == body.end() || it->is_null()) return std::nullopt;
  if (!it->is_boolean()) return HttpError{400, field_message(key, "must be a boolean")};
  out = it->get<bool>();
  return std::nullopt;
}

}  // namespace kiln::serve
