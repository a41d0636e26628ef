// multipart/form-data request bodies (ref: RFC 7578, RFC 2046 section 5.1.1): the parts of a
// form, each with its field name, its file name and Content-Type when it has them, and its bytes.
// Knows nothing of what the fields mean. Untrusted input: every malformed body is an Error that
// names what is wrong (no boundary, a part without a name, a body that ends before the closing
// delimiter...), never a crash. Stateless; safe from any thread.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"

namespace kiln::serve::http {

struct FormPart {
  std::string name;          // Content-Disposition's name
  std::string filename;      // Content-Disposition's filename; empty when the part is no file
  std::string content_type;  // the part's Content-Type; empty when absent
  std::string_view data;     // the part's bytes; non-owning: a view into the parsed body
};

// Most parts one form may have.
inline constexpr size_t kMaxFormParts = 64;

// Whether a Content-Type header value names multipart/form-data (case-insensitive).
bool is_multipart_form(std::string_view content_type);

// The parts of `body`, sent with `content_type` (multipart/form-data; boundary=...), in order.
// The parts' data views point into `body`, which must outlive them. A preamble before the first
// delimiter and an epilogue after the last are ignored, as the RFC says.
Result<std::vector<FormPart>> parse_multipart_form(std::string_view content_type, std::string_view body);

}  // namespace kiln::serve::http
