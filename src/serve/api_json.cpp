#include "serve/api_json.h"

#include <atomic>
#include <chrono>

#include "serve/http.h"

namespace kiln::serve {
namespace {

const char* error_type(int status) {
  switch (status) {
    case 401: return "authentication_error";
    case 404: return "not_found_error";
    case 503: return "unavailable_error";
    case 500: return "server_error";
    default: return "invalid_request_error";
  }
}

std::string dump_lenient(const json& body) { return body.dump(-1, ' ', false, json::error_handler_t::replace); }

}  // namespace

void send_error(httplib::Response& res, const HttpError& e) {
  res.status = e.status;
  json body = {{"error", {{"message", e.message}, {"type", error_type(e.status)}, {"code", e.status}}}};
  res.set_content(body.dump(), "application/json");
}

void send_json(httplib::Response& res, const json& body) { res.set_content(dump_lenient(body), "application/json"); }

std::string sse_event(const json& body) { return "data: " + dump_lenient(body) + "\n\n"; }

bool valid_utf8(const std::string& s) {
  try {
    (void)json(s).dump();
    return true;
  } catch (const json::type_error&) {
    return false;
  }
}

int64_t unix_time() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

std::string make_id(const char* prefix) {
  static std::atomic<uint64_t> counter{0};
  return std::string(prefix) + std::to_string(unix_time()) + "-" + std::to_string(counter++);
}

std::optional<json> parse_body(const httplib::Request& req, httplib::Response& res) {
  json body = json::parse(req.body, nullptr, /*allow_exceptions=*/false);
  if (body.is_discarded()) {
    send_error(res, {400, "the request body is not valid JSON"});
    return std::nullopt;
  }
  if (!body.is_object()) {
    send_error(res, {400, "the request body must be a JSON object"});
    return std::nullopt;
  }
  return body;
}

std::optional<HttpError> read_bool(const json& body, const char* key, bool& out) {
  auto it = body.find(key);
  if (it == body.end() || it->is_null()) return std::nullopt;
  if (!it->is_boolean()) return HttpError{400, std::string("field '") + key + "' must be a boolean"};
  out = it->get<bool>();
  return std::nullopt;
}

}  // namespace kiln::serve
