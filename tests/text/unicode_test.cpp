// Unicode tables (scripts/gen_unicode.py) and UTF-8 rules, against values from the Unicode
// Character Database and llama.cpp's decoding rules.
#include "text/unicode.h"

#include <gtest/gtest.h>

namespace kiln::text {
namespace {

TEST(Unicode, CategoryFlags) {
  EXPECT_TRUE(codepoint_flags('a').is_letter());
  EXPECT_TRUE(codepoint_flags(0x4E2D).is_letter());  // 中
  EXPECT_TRUE(codepoint_flags(0xAC00).is_letter());  // 가 (a range entry in UnicodeData.txt)
  EXPECT_TRUE(codepoint_flags('7').is_number());
  EXPECT_TRUE(codepoint_flags(0x0663).is_number());  // Arabic-Indic three
  EXPECT_TRUE(codepoint_flags(0x2163).is_number());  // Roman numeral four (Nl)
  EXPECT_TRUE(codepoint_flags(0x00BD).is_number());  // ½ (No)
  EXPECT_TRUE(codepoint_flags(0x0301).is_accent_mark());
  EXPECT_TRUE(codepoint_flags('!').is_punctuation());
  EXPECT_TRUE(codepoint_flags(0x2014).is_punctuation());  // em dash
  EXPECT_TRUE(codepoint_flags('+').is_symbol());
  EXPECT_TRUE(codepoint_flags('~').is_symbol());
  EXPECT_TRUE(codepoint_flags(0x1F642).is_symbol());  // 🙂
  EXPECT_TRUE(codepoint_flags(0x00A0).is_separator());
  EXPECT_TRUE(codepoint_flags(0x0007).is_control());
  EXPECT_TRUE(codepoint_flags(0x200B).is_control());  // zero width space is Cf
  EXPECT_TRUE(codepoint_flags(0x0378).is_control());  // unassigned counts as C
  EXPECT_TRUE(codepoint_flags(0x110000).is_undefined());
}

TEST(Unicode, Whitespace) {
  for (uint32_t c : {0x09u, 0x0Au, 0x0Bu, 0x0Cu, 0x0Du, 0x20u, 0x85u, 0xA0u, 0x1680u, 0x2000u, 0x200Au,
                     0x2028u, 0x2029u, 0x202Fu, 0x205Fu, 0x3000u}) {
    EXPECT_TRUE(codepoint_flags(c).is_whitespace()) << std::hex << c;
  }
  for (uint32_t c : {0x200Bu, 0x180Eu, 0x61u, 0x1Cu})
    EXPECT_FALSE(codepoint_flags(c).is_whitespace()) << std::hex << c;
}

TEST(Unicode, Lowercase) {
  EXPECT_EQ(to_lower('A'), uint32_t('a'));
  EXPECT_EQ(to_lower('a'), uint32_t('a'));
  EXPECT_EQ(to_lower(0x00C4), 0x00E4u);  // Ä
  EXPECT_EQ(to_lower(0x0130), 0x0069u);  // İ -> i
  EXPECT_EQ(to_lower(0x0100), 0x0101u);  // Ā (alternating pairs)
  EXPECT_EQ(to_lower(0x0101), 0x0101u);
  EXPECT_EQ(to_lower(0x01C5), 0x01C6u);    // ǅ
  EXPECT_EQ(to_lower(0x0416), 0x0436u);    // Ж
  EXPECT_EQ(to_lower(0x1E9E), 0x00DFu);    // ẞ
  EXPECT_EQ(to_lower(0x10400), 0x10428u);  // Deseret
  EXPECT_EQ(to_lower(0x4E2D), 0x4E2Du);
}

TEST(Unicode, NfdBase) {
  EXPECT_EQ(nfd_base(0x00E9), uint32_t('e'));  // é
  EXPECT_EQ(nfd_base(0x01D5), uint32_t('U'));  // Ǖ: recursive decomposition
  EXPECT_EQ(nfd_base(0x1E69), uint32_t('s'));  // ṩ
  EXPECT_EQ(nfd_base(0xAC01), 0x1100u);        // 각: Hangul, algorithmic
  EXPECT_EQ(nfd_base(0x212B), uint32_t('A'));  // Angstrom sign
  EXPECT_EQ(nfd_base('a'), uint32_t('a'));
  EXPECT_EQ(nfd_base(0x00DF), 0x00DFu);  // ß has no canonical decomposition
}

TEST(Unicode, Utf8DecodeFollowsLlamaCpp) {
  EXPECT_EQ(decode_utf8("a\xC3\xA9\xE4\xB8\xAD\xF0\x9F\x99\x82"),
            (std::vector<uint32_t>{'a', 0xE9, 0x4E2D, 0x1F642}));
  // each invalid or truncated sequence costs one byte and yields U+FFFD
  EXPECT_EQ(decode_utf8("\xFF"), (std::vector<uint32_t>{kReplacementChar}));
  EXPECT_EQ(decode_utf8("\x80\x80"), (std::vector<uint32_t>{kReplacementChar, kReplacementChar}));
  EXPECT_EQ(decode_utf8("\xE4\xB8"), (std::vector<uint32_t>{kReplacementChar, kReplacementChar}));
  EXPECT_EQ(decode_utf8("\xC3x"), (std::vector<uint32_t>{kReplacementChar, 'x'}));
  // llama.cpp does not reject overlong forms
  EXPECT_EQ(decode_utf8("\xC0\x80"), (std::vector<uint32_t>{0}));
  std::string s;
  for (uint32_t c : {0x41u, 0x7FFu, 0xFFFFu, 0x10FFFFu}) append_utf8(c, s);
  EXPECT_EQ(decode_utf8(s), (std::vector<uint32_t>{0x41, 0x7FF, 0xFFFF, 0x10FFFF}));
  EXPECT_EQ(encode_utf8(0x110000), encode_utf8(kReplacementChar));
  EXPECT_EQ(utf8_len('\xF0'), 4u);
  EXPECT_EQ(utf8_len('\x80'), 1u);
}

TEST(Unicode, Gpt2ByteMapping) {
  EXPECT_EQ(byte_to_utf8('a'), "a");
  EXPECT_EQ(byte_to_utf8(' '), "\xC4\xA0");   // Ġ
  EXPECT_EQ(byte_to_utf8('\n'), "\xC4\x8A");  // Ċ
  for (int b = 0; b < 256; ++b) {
    const std::vector<uint32_t> c = decode_utf8(byte_to_utf8(static_cast<uint8_t>(b)));
    ASSERT_EQ(c.size(), 1u);
    EXPECT_EQ(utf8_to_byte(c[0]), b);
  }
  EXPECT_EQ(utf8_to_byte(0x4E2D), -1);
}

}  // namespace
}  // namespace kiln::text
