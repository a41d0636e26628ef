#include "text/grammar/utf8_decode.h"

namespace kiln::grammar {

DecodedPiece decode_piece(std::string_view piece, PartialUtf8 start) {
  // Sequence length by the high nibble of the lead byte; 0 for a continuation byte.
  static constexpr int kLength[16] = {1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 2, 2, 3, 4};
  const size_t nul = piece.find('\0');
  if (nul != std::string_view::npos) piece = piece.substr(0, nul);

  DecodedPiece out;
  out.code_points.reserve(piece.size());
  size_t pos = 0;
  uint32_t value = start.value;
  int n_remain = start.n_remain;
  // Finish the sequence an earlier piece began.
  while (pos < piece.size() && n_remain > 0) {
    const auto byte = static_cast<uint8_t>(piece[pos]);
    if ((byte >> 6) != 2) return {{}, {0, -1}};
    value = (value << 6) + (byte & 0x3F);
    ++pos;
    --n_remain;
  }
  if (start.n_remain > 0 && n_remain == 0) out.code_points.push_back(value);
  while (pos < piece.size()) {
    const auto first = static_cast<uint8_t>(piece[pos]);
    n_remain = kLength[first >> 4] - 1;
    if (n_remain < 0) return {{}, {0, -1}};
    value = first & ((1u << (7 - n_remain)) - 1);
    ++pos;
    while (pos < piece.size() && n_remain > 0) {
      value = (value << 6) + (static_cast<uint8_t>(piece[pos]) & 0x3F);
      ++pos;
      --n_remain;
    }
    if (n_remain == 0) out.code_points.push_back(value);
  }
  out.partial = {value, n_remain};
  // A decoded code point 0 ends the piece for llama.cpp (its arrays are 0-terminated).
  for (size_t i = 0; i < out.code_points.size(); ++i) {
    if (out.code_points[i] == 0) {
      out.code_points.resize(i);
      break;
    }
  }
  return out;
}

std::pair<uint32_t, size_t> decode_utf8_char(std::string_view s) {
  static constexpr int kLength[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
  if (s.empty()) return {0, 0};
  const auto first = static_cast<uint8_t>(s[0]);
  const int len = kLength[first >> 4];
  uint32_t value = first & ((1u << (8 - len)) - 1);
  size_t pos = 1;
  while (pos < static_cast<size_t>(len) && pos < s.size() && s[pos] != '\0') {
    value = (value << 6) + (static_cast<uint8_t>(s[pos]) & 0x3F);
    ++pos;
  }
  return {value, pos};
}

}  // namespace kiln::grammar
