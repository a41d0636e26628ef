// encode_png: an RGB image written through libpng decodes (decode_image) to the same pixels, its text
// chunks are tEXt chunks as A1111 writes `parameters`, and bad images and keywords are Errors.
#include "image/png_encode.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "image/decode.h"

namespace kiln {
namespace {

RgbImage gradient(int32_t w, int32_t h) {
  RgbImage img;
  img.width = w;
  img.height = h;
  img.pixels.resize(static_cast<size_t>(w) * h * 3);
  for (size_t i = 0; i < img.pixels.size(); ++i) img.pixels[i] = static_cast<uint8_t>(i * 7 + i / 13);
  return img;
}

TEST(PngEncode, RoundTripsThePixels) {
  const RgbImage img = gradient(37, 5);
  auto png = encode_png(img, {});
  ASSERT_TRUE(png.ok()) << png.error().message;
  auto back = decode_image(*png);
  ASSERT_TRUE(back.ok()) << back.error().message;
  EXPECT_EQ(back->width, 37);
  EXPECT_EQ(back->height, 5);
  EXPECT_EQ(back->pixels, img.pixels);
}

TEST(PngEncode, WritesTextChunks) {
  const std::string text = "a cat\nSteps: 2, Sampler: euler_a";
  auto png = encode_png(gradient(2, 2), {{"parameters", text}});
  ASSERT_TRUE(png.ok()) << png.error().message;
  const std::string bytes(png->begin(), png->end());
  // Length, type, keyword, NUL, text: an uncompressed tEXt chunk.
  const std::string chunk = std::string("tEXtparameters") + '\0' + text;
  const size_t at = bytes.find(chunk);
  ASSERT_NE(at, std::string::npos);
  const size_t length = (static_cast<size_t>(static_cast<uint8_t>(bytes[at - 4])) << 24) |
                        (static_cast<size_t>(static_cast<uint8_t>(bytes[at - 3])) << 16) |
                        (static_cast<size_t>(static_cast<uint8_t>(bytes[at - 2])) << 8) |
                        static_cast<uint8_t>(bytes[at - 1]);
  EXPECT_EQ(length, chunk.size() - 4);
  EXPECT_TRUE(decode_image(*png).ok());
}

TEST(PngEncode, BadInputsAreErrors) {
  RgbImage img = gradient(4, 4);
  img.pixels.pop_back();
  auto r = encode_png(img, {});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("4 x 4"), std::string::npos) << r.error().message;
  r = encode_png(RgbImage{}, {});
  EXPECT_FALSE(r.ok());
  r = encode_png(gradient(1, 1), {{"", "x"}});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("keyword"), std::string::npos) << r.error().message;
  r = encode_png(gradient(1, 1), {{"key", std::string("a\0b", 3)}});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("NUL"), std::string::npos) << r.error().message;
}

}  // namespace
}  // namespace kiln
