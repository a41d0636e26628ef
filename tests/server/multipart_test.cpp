// multipart/form-data parsing (serve/http/multipart.h): the parts of well-formed forms as curl
// and browsers send them, bytes that look like delimiters inside a file, and a clear error for
// each malformed body.
#include "serve/http/multipart.h"

#include <gtest/gtest.h>

#include <string>

namespace kiln::serve::http {
namespace {

const std::string kType = "multipart/form-data; boundary=XyZ";

// One part: its header lines (CRLF between them, none after the last), a blank line, the data.
std::string part(const std::string& headers, const std::string& data) {
  return "--XyZ\r\n" + headers + "\r\n\r\n" + data + "\r\n";
}

TEST(Multipart, ReadsFieldsAndFilesInOrder) {
  // A file whose bytes hold the delimiter not at a line start, a blank line, NUL and 0xff bytes.
  const std::string file = std::string("RIFF--XyZ\r\n\r\n-\0\x01\xff", 17) + "\r\n";
  const std::string body =
      "preamble to ignore\r\n" + part("Content-Disposition: form-data; name=\"model\"", "whisper") +
      part(
          "content-disposition: form-data; name=\"file\"; filename=\"a \\\"b\\\".wav\"\r\n"
          "Content-Type: audio/wav",
          file) +
      part("Content-Disposition: form-data; name=empty", "") + "--XyZ--\r\nepilogue";
  auto parts = parse_multipart_form(kType, body);
  ASSERT_TRUE(parts.ok()) << parts.error().message;
  ASSERT_EQ(parts->size(), 3u);
  EXPECT_EQ((*parts)[0].name, "model");
  EXPECT_EQ((*parts)[0].data, "whisper");
  EXPECT_EQ((*parts)[0].filename, "");
  EXPECT_EQ((*parts)[1].name, "file");
  EXPECT_EQ((*parts)[1].filename, "a \"b\".wav");
  EXPECT_EQ((*parts)[1].content_type, "audio/wav");
  EXPECT_EQ((*parts)[1].data, file);
  EXPECT_EQ((*parts)[2].name, "empty");
  EXPECT_EQ((*parts)[2].data, "");
}

TEST(Multipart, TakesAQuotedBoundaryAndOtherParameters) {
  EXPECT_TRUE(is_multipart_form("Multipart/Form-Data; charset=utf-8; boundary=\"XyZ\""));
  EXPECT_FALSE(is_multipart_form("application/json"));
  // The parts are views into the body, which must outlive them.
  const std::string body = part("Content-Disposition: form-data; name=\"a\"", "1") + "--XyZ--";
  auto parts = parse_multipart_form("multipart/form-data; charset=utf-8; Boundary=\"XyZ\"", body);
  ASSERT_TRUE(parts.ok()) << parts.error().message;
  ASSERT_EQ(parts->size(), 1u);
  EXPECT_EQ((*parts)[0].data, "1");
}

TEST(Multipart, MalformedBodiesAreErrorsThatSayWhy) {
  const std::string ok_part = part("Content-Disposition: form-data; name=\"a\"", "1");
  std::string many;
  for (size_t i = 0; i <= kMaxFormParts; ++i) many += ok_part;
  struct Case {
    std::string type, body, want;
  };
  const Case cases[] = {
      {"application/json", "{}", "not multipart/form-data"},
      {"multipart/form-data", ok_part, "no boundary"},
      {"multipart/form-data; boundary=\"XyZ", ok_part, "unterminated quoted string"},
      {kType, "", "no delimiter"},
      {kType, "--XyZ", "not followed by a line break"},
      {kType, ok_part, "does not end with a delimiter"},  // no closing delimiter
      {kType, "--XyZ\r\nContent-Disposition: form-data; name=\"a\"\r\n\r\n12",
       "does not end with a delimiter"},
      {kType, part("Content-Type: text/plain", "1") + "--XyZ--", "has no Content-Disposition"},
      {kType, part("", "1") + "--XyZ--", "has no Content-Disposition"},
      {kType, part("Content-Disposition: form-data; filename=\"a\"", "1") + "--XyZ--", "has no name"},
      {kType, part("Content-Disposition: attachment; name=\"a\"", "1") + "--XyZ--", "not form-data"},
      {kType, part("Content-Disposition: form-data; name=\"a", "1") + "--XyZ--", "unterminated"},
      {kType, part("no colon here", "1") + "--XyZ--", "without ':'"},
      {kType, "--XyZ\r\n" + std::string(9000, 'h'), "no end of its headers"},
      {kType, many + "--XyZ--", "more than 64 parts"},
  };
  for (const Case& c : cases) {
    auto parts = parse_multipart_form(c.type, c.body);
    ASSERT_FALSE(parts.ok()) << c.type << " | " << c.body.substr(0, 80);
    EXPECT_NE(parts.error().message.find(c.want), std::string::npos)
        << "want '" << c.want << "' in: " << parts.error().message;
  }
}

}  // namespace
}  // namespace kiln::serve::http
