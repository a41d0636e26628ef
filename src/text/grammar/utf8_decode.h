// UTF-8 decoding exactly as llama.cpp's grammar code does it (ref: src/llama-grammar.cpp
// decode_utf8): lenient (continuation bytes are not checked after a lead byte), stopping at a NUL
// byte, and able to resume a sequence that a previous token piece left incomplete.
#pragma once

#include <cstdint>
#include <string_view>
#include <utility>
#include <vector>

namespace kiln::grammar {

// A UTF-8 sequence cut at the end of a token piece.
struct PartialUtf8 {
  uint32_t value = 0;  // bits decoded so far (unshifted)
  int n_remain = 0;    // continuation bytes still expected; -1: the bytes were not UTF-8
  bool operator==(const PartialUtf8&) const = default;
};

struct DecodedPiece {
  std::vector<uint32_t> code_points;  // the complete code points (empty when invalid)
  PartialUtf8 partial;                // what the piece leaves incomplete
};

// The code points of `piece` given what earlier pieces left incomplete. Decoding stops at a NUL
// byte or a decoded code point 0, as llama.cpp's NUL-terminated decoding does. An invalid
// sequence gives no code points and partial.n_remain = -1.
DecodedPiece decode_piece(std::string_view piece, PartialUtf8 start = {});

// One character of grammar text: the code point and the bytes it took (at least 1 unless `s` is
// empty). Lenient like llama.cpp's parser: it does not check continuation bytes.
std::pair<uint32_t, size_t> decode_utf8_char(std::string_view s);

}  // namespace kiln::grammar
