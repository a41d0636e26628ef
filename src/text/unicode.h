// Unicode helpers for the tokenizers: codepoint classes, lowercase, NFD base, UTF-8 coding, and
// GPT-2's byte <-> codepoint mapping. Semantics follow llama.cpp's src/unicode.cpp exactly, since
// token ids must match it. Tables come from scripts/gen_unicode.py. All functions are pure and
// thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace kiln::text {

// Category flags of a codepoint, grouped as llama.cpp groups them (ref: llama.cpp unicode.h).
struct CodepointFlags {
  enum : uint16_t {
    kUndefined = 0x0001,    // only for codepoints past U+10FFFF
    kNumber = 0x0002,       // \p{N}
    kLetter = 0x0004,       // \p{L}
    kSeparator = 0x0008,    // \p{Z}
    kAccentMark = 0x0010,   // \p{M}
    kPunctuation = 0x0020,  // \p{P}
    kSymbol = 0x0040,       // \p{S}
    kControl = 0x0080,      // \p{C}, unassigned codepoints included
    kCategoryMask = 0x00FF,
    kWhitespace = 0x0100,  // White_Space property (\s)
  };
  uint16_t bits = 0;

  bool is_undefined() const { return bits & kUndefined; }
  bool is_number() const { return bits & kNumber; }
  bool is_letter() const { return bits & kLetter; }
  bool is_separator() const { return bits & kSeparator; }
  bool is_accent_mark() const { return bits & kAccentMark; }
  bool is_punctuation() const { return bits & kPunctuation; }
  bool is_symbol() const { return bits & kSymbol; }
  bool is_control() const { return bits & kControl; }
  bool is_whitespace() const { return bits & kWhitespace; }
  uint16_t category() const { return bits & kCategoryMask; }
};

inline constexpr uint32_t kReplacementChar = 0xFFFD;

CodepointFlags codepoint_flags(uint32_t cpt);
uint32_t to_lower(uint32_t cpt);  // simple lowercase mapping; cpt itself when none
uint32_t nfd_base(uint32_t cpt);  // first codepoint of the canonical decomposition
bool is_han(uint32_t cpt);        // CJK ideograph blocks, as llama.cpp's unicode_cpt_is_han

// Byte length of a UTF-8 sequence from its lead byte (1 for stray continuation bytes), as
// llama.cpp's unicode_len_utf8.
size_t utf8_len(char lead);
// Decodes one codepoint at `offset`, advancing it. An invalid or truncated sequence yields
// U+FFFD and advances one byte (llama.cpp's rule); never reads past the end.
uint32_t decode_utf8(std::string_view s, size_t& offset);
std::vector<uint32_t> decode_utf8(std::string_view s);
void append_utf8(uint32_t cpt, std::string& out);  // cpt > 0x10FFFF appends U+FFFD
std::string encode_utf8(uint32_t cpt);

// SentencePiece's visible space U+2581, which SPM, UGM and Gemma 4 token texts write for ' '.
inline constexpr std::string_view kEscapedSpace = "\xE2\x96\x81";
std::string escape_spaces(std::string_view text);    // every ' ' -> U+2581
std::string unescape_spaces(std::string_view text);  // every U+2581 -> ' '

// SentencePiece's name for a byte token: "<0xXX>" (upper-case hex).
std::string byte_token_text(uint8_t byte);

// GPT-2's reversible byte <-> printable codepoint mapping (ref: OpenAI bytes_to_unicode).
const std::string& byte_to_utf8(uint8_t byte);
// The byte a mapped codepoint stands for; -1 when `cpt` is not in the mapping.
int utf8_to_byte(uint32_t cpt);

}  // namespace kiln::text
