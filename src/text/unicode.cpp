#include "text/unicode.h"

#include <algorithm>
#include <array>

#include "text/unicode_data.h"

namespace kiln::text {

namespace ud = unicode_data;

CodepointFlags codepoint_flags(uint32_t cpt) {
  if (cpt >= 0x110000) return CodepointFlags{CodepointFlags::kUndefined};
  const ud::FlagRange* begin = ud::kFlagRanges;
  const ud::FlagRange* end = ud::kFlagRanges + ud::kFlagRangesSize;
  const ud::FlagRange* it =
      std::upper_bound(begin, end, cpt, [](uint32_t c, const ud::FlagRange& r) { return c < r.start; }) - 1;
  uint16_t bits = it->flags;
  if (std::binary_search(ud::kWhitespace, ud::kWhitespace + ud::kWhitespaceSize, cpt)) {
    bits |= CodepointFlags::kWhitespace;
  }
  return CodepointFlags{bits};
}

uint32_t to_lower(uint32_t cpt) {
  const ud::LowerRun* begin = ud::kLowerRuns;
  const ud::LowerRun* end = ud::kLowerRuns + ud::kLowerRunsSize;
  const ud::LowerRun* it =
      std::upper_bound(begin, end, cpt, [](uint32_t c, const ud::LowerRun& r) { return c < r.first; });
  if (it == begin) return cpt;
  --it;
  if (cpt > it->last || (cpt - it->first) % it->stride != 0) return cpt;
  return static_cast<uint32_t>(static_cast<int64_t>(cpt) + it->delta);
}

uint32_t nfd_base(uint32_t cpt) {
  const ud::NfdRun* begin = ud::kNfdRuns;
  const ud::NfdRun* end = ud::kNfdRuns + ud::kNfdRunsSize;
  const ud::NfdRun* it =
      std::upper_bound(begin, end, cpt, [](uint32_t c, const ud::NfdRun& r) { return c < r.first; });
  if (it == begin) return cpt;
  --it;
  return cpt <= it->last ? it->base : cpt;
}

bool is_han(uint32_t cpt) {
  return (cpt >= 0x4E00 && cpt <= 0x9FFF) || (cpt >= 0x3400 && cpt <= 0x4DBF) ||
         (cpt >= 0x20000 && cpt <= 0x2A6DF) || (cpt >= 0x2A700 && cpt <= 0x2B73F) ||
         (cpt >= 0x2B740 && cpt <= 0x2B81F) || (cpt >= 0x2B820 && cpt <= 0x2CEAF) ||
         (cpt >= 0x2CEB0 && cpt <= 0x2EBEF) || (cpt >= 0xF900 && cpt <= 0xFAFF) ||
         (cpt >= 0x2F800 && cpt <= 0x2FA1F);
}

size_t utf8_len(char lead) {
  static constexpr uint8_t kLen[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
  return kLen[static_cast<uint8_t>(lead) >> 4];
}

uint32_t decode_utf8(std::string_view s, size_t& offset) {
  const auto byte = [&](size_t i) { return static_cast<uint8_t>(s[i]); };
  const auto cont = [&](size_t i) { return i < s.size() && (byte(i) & 0xC0) == 0x80; };
  const uint8_t b0 = byte(offset);
  // ref: llama.cpp unicode_cpt_from_utf8; the lead byte alone decides the length, overlong forms
  // are accepted, and any failure consumes one byte as U+FFFD.
  if (!(b0 & 0x80)) {
    offset += 1;
    return b0;
  }
  if ((b0 & 0x40) && !(b0 & 0x20)) {
    if (cont(offset + 1)) {
      uint32_t c = ((b0 & 0x1F) << 6) | (byte(offset + 1) & 0x3F);
      offset += 2;
      return c;
    }
  } else if ((b0 & 0x40) && !(b0 & 0x10)) {
    if (cont(offset + 1) && cont(offset + 2)) {
      uint32_t c = ((b0 & 0x0F) << 12) | ((byte(offset + 1) & 0x3F) << 6) | (byte(offset + 2) & 0x3F);
      offset += 3;
      return c;
    }
  } else if ((b0 & 0x40) && !(b0 & 0x08)) {
    if (cont(offset + 1) && cont(offset + 2) && cont(offset + 3)) {
      uint32_t c = ((b0 & 0x07) << 18) | ((byte(offset + 1) & 0x3F) << 12) |
                   ((byte(offset + 2) & 0x3F) << 6) | (byte(offset + 3) & 0x3F);
      offset += 4;
      return c;
    }
  }
  offset += 1;
  return kReplacementChar;
}

std::vector<uint32_t> decode_utf8(std::string_view s) {
  std::vector<uint32_t> out;
  out.reserve(s.size());
  size_t offset = 0;
  while (offset < s.size()) out.push_back(decode_utf8(s, offset));
  return out;
}

void append_utf8(uint32_t cpt, std::string& out) {
  if (cpt <= 0x7F) {
    out.push_back(static_cast<char>(cpt));
  } else if (cpt <= 0x7FF) {
    out.push_back(static_cast<char>(0xC0 | (cpt >> 6)));
    out.push_back(static_cast<char>(0x80 | (cpt & 0x3F)));
  } else if (cpt <= 0xFFFF) {
    out.push_back(static_cast<char>(0xE0 | (cpt >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cpt >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cpt & 0x3F)));
  } else if (cpt <= 0x10FFFF) {
    out.push_back(static_cast<char>(0xF0 | (cpt >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cpt >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cpt >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cpt & 0x3F)));
  } else {
    append_utf8(kReplacementChar, out);
  }
}

std::string encode_utf8(uint32_t cpt) {
  std::string s;
  append_utf8(cpt, s);
  return s;
}

namespace {

std::string replace_all(std::string_view s, std::string_view from, std::string_view to) {
  std::string out;
  out.reserve(s.size());
  size_t pos = 0;
  for (size_t hit; (hit = s.find(from, pos)) != std::string_view::npos; pos = hit + from.size()) {
    out.append(s.substr(pos, hit - pos)).append(to);
  }
  out.append(s.substr(pos));
  return out;
}

}  // namespace

std::string escape_spaces(std::string_view text) { return replace_all(text, " ", kEscapedSpace); }
std::string unescape_spaces(std::string_view text) { return replace_all(text, kEscapedSpace, " "); }

std::string byte_token_text(uint8_t byte) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  return {'<', '0', 'x', kHex[byte >> 4], kHex[byte & 15], '>'};
}

namespace {

// byte -> codepoint of GPT-2's mapping: printable Latin-1 bytes map to themselves, the other 68
// bytes to 256, 257, ... in byte order.
const std::array<uint32_t, 256>& byte_to_cpt_table() {
  static const std::array<uint32_t, 256> table = [] {
    std::array<uint32_t, 256> t{};
    uint32_t n = 0;
    for (uint32_t b = 0; b < 256; ++b) {
      const bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
      t[b] = printable ? b : 256 + n++;
    }
    return t;
  }();
  return table;
}

}  // namespace

const std::string& byte_to_utf8(uint8_t byte) {
  static const std::array<std::string, 256> table = [] {
    std::array<std::string, 256> t;
    for (int b = 0; b < 256; ++b) t[b] = encode_utf8(byte_to_cpt_table()[b]);
    return t;
  }();
  return table[byte];
}

int utf8_to_byte(uint32_t cpt) {
  static const std::array<int16_t, 324> table = [] {
    std::array<int16_t, 324> t;
    t.fill(-1);
    for (int b = 0; b < 256; ++b) t[byte_to_cpt_table()[b]] = static_cast<int16_t>(b);
    return t;
  }();
  return cpt < table.size() ? table[cpt] : -1;
}

}  // namespace kiln::text
