// Image bytes carried as text: base64 (RFC 4648, the standard alphabet) and data URIs
// (RFC 2397, "data:image/png;base64,...") as OpenAI-style requests send images.
// Errors name the problem and where it is: "image: invalid base64 character '%' at offset 12".
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"

namespace kiln {

// Encodes bytes as base64 text (padded).
std::string encode_base64(std::span<const uint8_t> bytes);

// Decodes base64 text. Padding ('=') is optional but, when present, must be right; ASCII white
// space (line breaks of MIME-wrapped text) is skipped; anything else outside the alphabet is an
// error.
Result<std::vector<uint8_t>> decode_base64(std::string_view text);

struct DataUri {
  std::string_view media_type;  // "image/png"; empty when the URI gives none
  std::vector<uint8_t> bytes;
};

// Parses "data:[<media type>][;param=value]*;base64,<data>". URIs whose data is not base64 are
// refused (images are binary), as are other schemes.
Result<DataUri> parse_data_uri(std::string_view uri);

}  // namespace kiln
