#include "serve/http/wire.h"

#include <cstdio>

namespace kiln::serve::http {
namespace {

void append_clean(std::string& out, std::string_view s) {
  for (char ch : s) out.push_back(ch == '\r' || ch == '\n' ? ' ' : ch);
}

void append_header(std::string& out, std::string_view name, std::string_view value) {
  append_clean(out, name);
  out += ": ";
  append_clean(out, value);
  out += "\r\n";
}

}  // namespace

std::string response_head(const Response& r, const HeadOptions& o, const Headers& extra) {
  std::string out = "HTTP/1.1 " + std::to_string(r.status) + " ";
  out += reason_phrase(r.status);
  out += "\r\n";
  append_header(out, "Server", "kiln");
  if (!r.content_type.empty()) append_header(out, "Content-Type", r.content_type);
  for (const Header& h : r.headers) append_header(out, h.name, h.value);
  for (const Header& h : extra) append_header(out, h.name, h.value);
  switch (o.framing) {
    case Framing::Length:
      append_header(out, "Content-Length", std::to_string(o.length));
      break;
    case Framing::Chunked:
      append_header(out, "Transfer-Encoding", "chunked");
      break;
    case Framing::UntilClose:
      break;
  }
  if (o.close || o.framing == Framing::UntilClose)
    append_header(out, "Connection", "close");
  else if (o.version == 10 && o.keep_alive_10)
    append_header(out, "Connection", "keep-alive");
  out += "\r\n";
  return out;
}

std::string chunk(std::string_view bytes) {
  if (bytes.empty()) return {};
  char size[24];
  const int n = std::snprintf(size, sizeof size, "%zx\r\n", bytes.size());
  std::string out;
  out.reserve(static_cast<size_t>(n) + bytes.size() + 2);
  out.append(size, static_cast<size_t>(n));
  out.append(bytes);
  out += "\r\n";
  return out;
}

}  // namespace kiln::serve::http
