// JPEG encoding (image/jpeg_encode.h): a smooth image comes back through kiln's decoder close to
// itself at sd-cli's quality 90, the EXIF UserComment holds A1111's parameters as piexif writes them
// (the bytes checked here), and bad sizes, qualities and comments too long for a segment are Errors.
#include "image/jpeg_encode.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "image/decode.h"

namespace kiln {
namespace {

RgbImage gradient(int32_t w, int32_t h) {
  RgbImage img;
  img.width = w;
  img.height = h;
  for (int32_t y = 0; y < h; ++y)
    for (int32_t x = 0; x < w; ++x)
      for (int c = 0; c < 3; ++c) img.pixels.push_back(static_cast<uint8_t>(40 + x + y + c * 30));
  return img;
}

TEST(JpegEncode, RoundTripsThroughTheDecoder) {
  const RgbImage img = gradient(64, 48);
  auto jpeg = encode_jpeg(img, 90, "a cat\nSteps: 2");
  ASSERT_TRUE(jpeg.ok()) << jpeg.error().message;
  ASSERT_GE(jpeg->size(), 4u);
  EXPECT_EQ((*jpeg)[0], 0xff);
  EXPECT_EQ((*jpeg)[1], 0xd8);
  auto back = decode_image(*jpeg);
  ASSERT_TRUE(back.ok()) << back.error().message;
  ASSERT_EQ(back->width, 64);
  ASSERT_EQ(back->height, 48);
  int worst = 0;
  for (size_t i = 0; i < img.pixels.size(); ++i)
    worst = std::max(worst, std::abs(back->pixels[i] - img.pixels[i]));
  EXPECT_LE(worst, 12);
}

TEST(JpegEncode, ExifUserCommentAsPiexifWritesIt) {
  // "é" (U+00E9) and "😀" (U+1F600, a surrogate pair in UTF-16) and an invalid byte (U+FFFD).
  auto seg = exif_user_comment("a\xc3\xa9\xf0\x9f\x98\x80\xff");
  ASSERT_TRUE(seg.ok()) << seg.error().message;
  // clang-format off
  const std::vector<uint8_t> expected = {
      'E', 'x', 'i', 'f', 0, 0,                    // the APP1 identifier
      'M', 'M', 0, 42, 0, 0, 0, 8,                 // big-endian TIFF, IFD0 at 8
      0, 1, 0x87, 0x69, 0, 4, 0, 0, 0, 1, 0, 0, 0, 26, 0, 0, 0, 0,  // ExifIFD pointer; no next IFD
      0, 1, 0x92, 0x86, 0, 7, 0, 0, 0, 18, 0, 0, 0, 44, 0, 0, 0, 0,  // UserComment, 18 bytes at 44
      'U', 'N', 'I', 'C', 'O', 'D', 'E', 0,        // piexif's "unicode" prefix, then UTF-16 BE
      0, 'a', 0, 0xe9, 0xd8, 0x3d, 0xde, 0x00, 0xff, 0xfd};
  // clang-format on
  EXPECT_EQ(*seg, expected);
  // In the file: an APP1 marker holding it.
  auto jpeg = encode_jpeg(gradient(8, 8), 90, "a\xc3\xa9\xf0\x9f\x98\x80\xff");
  ASSERT_TRUE(jpeg.ok()) << jpeg.error().message;
  const std::string bytes(jpeg->begin(), jpeg->end());
  const std::string marker = std::string("\xff\xe1") + char(0) + char(expected.size() + 2) +
                             std::string(expected.begin(), expected.end());
  EXPECT_NE(bytes.find(marker), std::string::npos);
  // No comment: no EXIF.
  jpeg = encode_jpeg(gradient(8, 8), 90, "");
  ASSERT_TRUE(jpeg.ok()) << jpeg.error().message;
  EXPECT_EQ(std::string(jpeg->begin(), jpeg->end()).find("Exif"), std::string::npos);
}

TEST(JpegEncode, BadInputsAreErrors) {
  RgbImage empty;
  EXPECT_FALSE(encode_jpeg(empty, 90, "").ok());
  RgbImage short_pixels = gradient(8, 8);
  short_pixels.pixels.pop_back();
  EXPECT_FALSE(encode_jpeg(short_pixels, 90, "").ok());
  EXPECT_FALSE(encode_jpeg(gradient(8, 8), 0, "").ok());
  EXPECT_FALSE(encode_jpeg(gradient(8, 8), 101, "").ok());
  auto r = encode_jpeg(gradient(8, 8), 90, std::string(40000, 'x'));  // 80000 bytes in UTF-16
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("more than one JPEG segment holds"), std::string::npos)
      << r.error().message;
}

}  // namespace
}  // namespace kiln
