// Base64 and data URIs (image/data_uri.h), and content ids (image/content_id.h).
#include <gtest/gtest.h>

#include <string>

#include "image/content_id.h"
#include "image/data_uri.h"

namespace kiln::test {
namespace {

std::string as_string(const std::vector<uint8_t>& b) { return std::string(b.begin(), b.end()); }

TEST(ImageBase64, DecodesTheStandardAlphabet) {
  // RFC 4648 test vectors, with and without padding, and wrapped lines.
  const std::pair<const char*, const char*> vectors[] = {{"", ""},         {"Zg==", "f"},       {"Zm8=", "fo"},
                                                         {"Zm9v", "foo"},  {"Zm9vYg==", "foob"}, {"Zm9vYmE=", "fooba"},
                                                         {"Zm9vYmFy", "foobar"}, {"Zm9vYg", "foob"}, {"Zm9v\r\nYmFy\n", "foobar"}};
  for (const auto& [in, want] : vectors) {
    auto out = decode_base64(in);
    ASSERT_TRUE(out.ok()) << in << ": " << out.error().message;
    EXPECT_EQ(as_string(*out), want) << in;
  }
  auto bin = decode_base64("/+8A");
  ASSERT_TRUE(bin.ok());
  EXPECT_EQ(*bin, (std::vector<uint8_t>{0xff, 0xef, 0x00}));
}

TEST(ImageBase64, RefusesMalformedText) {
  auto expect = [](const char* in, const std::string& needle) {
    auto out = decode_base64(in);
    ASSERT_FALSE(out.ok()) << in;
    EXPECT_NE(out.error().message.find(needle), std::string::npos) << out.error().message;
  };
  expect("Zm9v%mFy", "invalid base64 character '%' at offset 4");
  expect("Zm9v-_Fy", "invalid base64 character '-' at offset 4");  // the URL-safe alphabet is another
  expect("Zm9vY", "dangling 6 bits");
  expect("Zg=", "1 padding");
  expect("Zm9v====", "4 padding");
  expect("Zg==Zg==", "data after the padding");
  expect("Zh==", "bits set past the data");
}

// RFC 4648's test vectors, and every length over every byte value back through decode_base64.
TEST(ImageDataUri, EncodesBase64) {
  const std::pair<std::string, std::string> vectors[] = {{"", ""},
                                                         {"f", "Zg=="},
                                                         {"fo", "Zm8="},
                                                         {"foo", "Zm9v"},
                                                         {"foob", "Zm9vYg=="},
                                                         {"fooba", "Zm9vYmE="},
                                                         {"foobar", "Zm9vYmFy"}};
  for (const auto& [in, out] : vectors)
    EXPECT_EQ(encode_base64(std::span(reinterpret_cast<const uint8_t*>(in.data()), in.size())), out) << in;
  std::vector<uint8_t> bytes;
  for (int i = 0; i < 259; ++i) {
    auto back = decode_base64(encode_base64(bytes));
    ASSERT_TRUE(back.ok()) << i;
    EXPECT_EQ(*back, bytes) << i;
    bytes.push_back(static_cast<uint8_t>(i * 7 + 3));
  }
}

TEST(ImageDataUri, ParsesBase64DataUris) {
  auto d = parse_data_uri("data:image/png;base64,iVBORw0KGgo=");
  ASSERT_TRUE(d.ok()) << d.error().message;
  EXPECT_EQ(d->media_type, "image/png");
  EXPECT_EQ(d->bytes, (std::vector<uint8_t>{0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'}));
  auto e = parse_data_uri("DATA:;charset=x;base64,Zm9v");
  ASSERT_TRUE(e.ok()) << e.error().message;
  EXPECT_EQ(e->media_type, "");
  EXPECT_EQ(as_string(e->bytes), "foo");

  auto expect = [](const char* in, const std::string& needle) {
    auto out = parse_data_uri(in);
    ASSERT_FALSE(out.ok()) << in;
    EXPECT_NE(out.error().message.find(needle), std::string::npos) << out.error().message;
  };
  expect("https://example.com/a.png", "not a data URI");
  expect("data:image/png;base64", "without ','");
  expect("data:image/svg+xml,<svg/>", "without ';base64'");
  expect("data:image/png;base64,iVBO!w0K", "invalid base64 character '!'");
}

TEST(ImageContentId, IsTheSha256OfTheBytes) {
  const std::string abc = "abc";
  EXPECT_EQ(content_id({reinterpret_cast<const uint8_t*>(abc.data()), abc.size()}),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(content_id({}), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
}

}  // namespace
}  // namespace kiln::test
