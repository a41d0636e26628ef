#include "serve/http/multipart.h"

#include <optional>
#include <utility>

#include "serve/http/message.h"

namespace kiln::serve::http {
namespace {

// Longest header section of one part; real ones are a few hundred bytes.
constexpr size_t kMaxPartHeaderBytes = 8 << 10;
constexpr std::string_view kCrlf = "\r\n";

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

// A header value's type and its parameters: `type; a=b; c="d \" e"` (ref: RFC 7231 section
// 3.1.1.1, RFC 2183). Parameter names keep their case (compare with iequals); quoted values are
// unescaped. Nullopt for an unterminated quoted string.
struct HeaderValue {
  std::string_view type;
  std::vector<std::pair<std::string_view, std::string>> params;
  const std::string* param(std::string_view name) const {
    for (const auto& [n, v] : params)
      if (iequals(n, name)) return &v;
    return nullptr;
  }
};

std::optional<HeaderValue> parse_header_value(std::string_view s) {
  HeaderValue out;
  size_t i = s.find(';');
  out.type = trim(s.substr(0, i));
  while (i != std::string_view::npos && i < s.size()) {
    ++i;  // past ';'
    const size_t eq = s.find_first_of("=;", i);
    if (eq == std::string_view::npos || s[eq] == ';') {  // a parameter without a value: skipped
      i = eq;
      continue;
    }
    const std::string_view name = trim(s.substr(i, eq - i));
    size_t j = eq + 1;
    while (j < s.size() && (s[j] == ' ' || s[j] == '\t')) ++j;
    std::string value;
    if (j < s.size() && s[j] == '"') {
      for (++j;; ++j) {
        if (j >= s.size()) return std::nullopt;
        if (s[j] == '"') break;
        if (s[j] == '\\' && j + 1 < s.size()) ++j;
        value += s[j];
      }
      i = s.find(';', j);
    } else {
      i = s.find(';', j);
      value = std::string(trim(s.substr(j, i == std::string_view::npos ? std::string_view::npos : i - j)));
    }
    out.params.emplace_back(name, std::move(value));
  }
  return out;
}

// Reads the header lines of part `index` (`block`: the lines, CRLF-separated, without the blank
// line) into `part`.
Status read_part_headers(std::string_view block, size_t index, FormPart& part) {
  bool disposition = false;
  while (!block.empty()) {
    const size_t end = block.find(kCrlf);
    const std::string_view line = block.substr(0, end);
    block = end == std::string_view::npos ? std::string_view() : block.substr(end + 2);
    const size_t colon = line.find(':');
    if (colon == std::string_view::npos)
      return make_error("multipart: part ", index, ": a header line without ':'");
    const std::string_view name = line.substr(0, colon);
    const std::string_view value = trim(line.substr(colon + 1));
    if (iequals(name, "Content-Type")) {
      part.content_type = std::string(value);
    } else if (iequals(name, "Content-Disposition")) {
      auto v = parse_header_value(value);
      if (!v)
        return make_error("multipart: part ", index,
                          ": Content-Disposition has an unterminated quoted string");
      if (!iequals(v->type, "form-data"))
        return make_error("multipart: part ", index, ": Content-Disposition is '", v->type,
                          "', not form-data");
      const std::string* field = v->param("name");
      if (!field || field->empty())
        return make_error("multipart: part ", index, ": Content-Disposition has no name");
      part.name = *field;
      if (const std::string* file = v->param("filename")) part.filename = *file;
      disposition = true;
    }
  }
  if (!disposition) return make_error("multipart: part ", index, " has no Content-Disposition header");
  return ok_status();
}

}  // namespace

bool is_multipart_form(std::string_view content_type) {
  auto v = parse_header_value(content_type);
  return v && iequals(v->type, "multipart/form-data");
}

Result<std::vector<FormPart>> parse_multipart_form(std::string_view content_type, std::string_view body) {
  auto type = parse_header_value(content_type);
  if (!type)
    return make_error("multipart: the Content-Type '", content_type, "' has an unterminated quoted string");
  if (!iequals(type->type, "multipart/form-data"))
    return make_error("multipart: the Content-Type is '", content_type, "', not multipart/form-data");
  const std::string* boundary = type->param("boundary");
  // ref: RFC 2046 section 5.1.1: 1 to 70 characters.
  if (!boundary || boundary->empty() || boundary->size() > 70)
    return make_error("multipart: the Content-Type has no boundary of 1 to 70 characters");
  const std::string delimiter = "--" + *boundary;
  const std::string next_delimiter = std::string(kCrlf) + delimiter;

  // The first delimiter opens the body or a line of its own (after the preamble).
  size_t pos = body.starts_with(delimiter) ? 0 : body.find(next_delimiter);
  if (pos == std::string_view::npos)
    return make_error("multipart: the body has no delimiter '", delimiter, "'");
  if (pos != 0) pos += 2;
  std::vector<FormPart> parts;
  for (;;) {
    pos += delimiter.size();
    if (body.substr(pos, 2) == "--") return parts;  // the close delimiter; the epilogue is ignored
    while (pos < body.size() && (body[pos] == ' ' || body[pos] == '\t')) ++pos;  // transport padding
    if (body.substr(pos, 2) != kCrlf)
      return make_error("multipart: a delimiter at byte ", pos, " is not followed by a line break");
    pos += 2;
    if (parts.size() == kMaxFormParts) return make_error("multipart: more than ", kMaxFormParts, " parts");
    const size_t index = parts.size();
    // Headers, then a blank line; a part with no headers starts with the blank line at once.
    const size_t headers_end = body.substr(pos, 2) == kCrlf ? pos : body.find("\r\n\r\n", pos);
    if (headers_end == std::string_view::npos || headers_end - pos > kMaxPartHeaderBytes)
      return make_error("multipart: part ", index, ": no end of its headers within ", kMaxPartHeaderBytes,
                        " bytes");
    FormPart part;
    if (auto s = read_part_headers(body.substr(pos, headers_end - pos), index, part); !s.ok())
      return s.error();
    const size_t data_begin = headers_end + (headers_end == pos ? 2 : 4);
    const size_t data_end = body.find(next_delimiter, data_begin);
    if (data_end == std::string_view::npos)
      return make_error("multipart: part ", index, " ('", part.name,
                        "') does not end with a delimiter: the body is cut short");
    part.data = body.substr(data_begin, data_end - data_begin);
    parts.push_back(std::move(part));
    pos = data_end + 2;
  }
}

}  // namespace kiln::serve::http
