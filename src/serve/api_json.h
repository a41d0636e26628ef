// The JSON side of the HTTP API: OpenAI-shaped errors, JSON answers, the request body as a JSON
// object (nesting bounded), and typed reads of request fields (each wrong type or out-of-range
// value is a 400 naming the field). Stateless; safe from any thread.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>

#include "serve/http/exchange.h"
#include "serve/http/message.h"
#include "text/json_depth.h"

namespace kiln::serve {

using nlohmann::json;
using nlohmann::ordered_json;

// Deepest nesting of arrays and objects a request body (and JSON text inside it) may have.
// Everything that walks a request (dumps, template values, the Jinja renderer) recurses at most
// this deep.
inline constexpr int kMaxJsonDepth = text::kMaxJsonDepth;

// An error answer: HTTP status and a message for {"error": {"message", "type", "code"}}.
struct HttpError {
  int status;
  std::string message;
};

// OpenAI's error object {"error": {"message", "type", "code"}}.
json error_json(const HttpError& e);
// An answer with error_json; a 503 says Retry-After: 1.
http::Response error_response(const HttpError& e);
// `body` as JSON; invalid UTF-8 inside strings (a piece cut mid-character) becomes U+FFFD.
http::Response json_response(const json& body);
void send_error(http::Exchange& ex, const HttpError& e);
void send_json(http::Exchange& ex, const json& body);
// One SSE event ("data: JSON\n\n"), with the same UTF-8 replacement as json_response.
std::string sse_event(const json& body);
// JSON text with invalid UTF-8 replaced (see json_response).
std::string dump_json(const json& body);
bool valid_utf8(const std::string& s);

int64_t unix_time();
// prefix + 32 hex digits: 128 bits from the kernel's CSPRNG (getrandom(2), /dev/urandom's
// source), so that an id names one response and cannot be guessed from another.
std::string make_id(const char* prefix);

// `text` as a JSON object: 400 when it is not JSON, nests deeper than kMaxJsonDepth, or is not an
// object.
std::optional<HttpError> parse_json_object(std::string_view text, json& out);
// The request body through parse_json_object; otherwise answers the 400 and returns nullopt.
std::optional<json> parse_body(const http::Request& req, http::Exchange& ex);

// "field 'KEY' WHAT".
std::string field_message(std::string_view key, std::string_view what);

// Optional fields: absent or null leaves `out` unchanged; another type, a non-integer for an
// integer type, or a value outside T's range (or not finite) is a 400 naming the field.
template <class T>
std::optional<HttpError> read_number(const json& body, const char* key, T& out) {
  auto it = body.find(key);
  if (it == body.end() || it->is_null()) return std::nullopt;
  if (!it->is_number()) return HttpError{400, field_message(key, "must be a number")};
  if constexpr (std::is_integral_v<T>) {
    if (!it->is_number_integer()) return HttpError{400, field_message(key, "must be an integer")};
    using L = std::numeric_limits<T>;
    bool fits = false;
    if (it->is_number_unsigned()) {
      fits = it->template get<uint64_t>() <= static_cast<uint64_t>(L::max());
    } else {
      const int64_t v = it->template get<int64_t>();
      fits = v < 0 ? L::is_signed && v >= static_cast<int64_t>(L::min())
                   : static_cast<uint64_t>(v) <= static_cast<uint64_t>(L::max());
    }
    if (!fits)
      return HttpError{400, field_message(key, "is out of range (" + std::to_string(L::min()) + ".." +
                                                   std::to_string(L::max()) + ", got " + it->dump() + ")")};
    out = it->template get<T>();
  } else {
    const double v = it->template get<double>();
    if (!std::isfinite(v) || std::fabs(v) > static_cast<double>(std::numeric_limits<T>::max()))
      return HttpError{400, field_message(key, "is out of range (got " + it->dump() + ")")};
    out = static_cast<T>(v);
  }
  return std::nullopt;
}
// The same, and within [lo, hi].
template <class T>
std::optional<HttpError> read_number_in(const json& body, const char* key, T lo, T hi, T& out) {
  T v = out;
  if (auto e = read_number(body, key, v)) return e;
  if (v < lo || v > hi) {
    auto str = [](T x) { return json(x).dump(); };
    return HttpError{400,
                     field_message(key, "must be in " + str(lo) + ".." + str(hi) + " (got " + str(v) + ")")};
  }
  out = v;
  return std::nullopt;
}
std::optional<HttpError> read_bool(const json& body, const char* key, bool& out);

}  // namespace kiln::serve
