// The JSON side of the HTTP API: OpenAI-shaped errors, response bodies, and typed reads of request
// fields (each wrong type is a 400 naming the field). Stateless; safe from any thread.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <type_traits>

#include <nlohmann/json.hpp>

namespace httplib {
struct Request;
struct Response;
}  // namespace httplib

namespace kiln::serve {

using nlohmann::json;
using nlohmann::ordered_json;

// An error answer: HTTP status and a message for {"error": {"message", "type", "code"}}.
struct HttpError {
  int status;
  std::string message;
};

void send_error(httplib::Response& res, const HttpError& e);
// Invalid UTF-8 inside strings (a piece cut mid-character) becomes U+FFFD.
void send_json(httplib::Response& res, const json& body);
// One SSE event ("data: JSON\n\n"), with the same UTF-8 replacement as send_json.
std::string sse_event(const json& body);
bool valid_utf8(const std::string& s);

int64_t unix_time();
// prefix + time + counter: unique within this process.
std::string make_id(const char* prefix);

// The request body as a JSON object; otherwise sends a 400 and returns nullopt.
std::optional<json> parse_body(const httplib::Request& req, httplib::Response& res);

// Optional fields: absent or null leaves `out` unchanged; another type is a 400.
template <class T>
std::optional<HttpError> read_number(const json& body, const char* key, T& out) {
  auto it = body.find(key);
  if (it == body.end() || it->is_null()) return std::nullopt;
  if (!it->is_number()) return HttpError{400, std::string("field '") + key + "' must be a number"};
  if constexpr (std::is_integral_v<T>) {
    if (!it->is_number_integer() && !it->is_number_unsigned())
      return HttpError{400, std::string("field '") + key + "' must be an integer"};
  }
  out = it->get<T>();
  return std::nullopt;
}
std::optional<HttpError> read_bool(const json& body, const char* key, bool& out);

}  // namespace kiln::serve
