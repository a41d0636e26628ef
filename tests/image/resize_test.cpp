// resize_image / resize_to_fit against llama.cpp's img_tool::resize (tools/mtmd/mtmd-image.cpp),
// byte for byte: the expected hashes are of llama.cpp's output for the same source image, made by
// compiling its mtmd-image.cpp into a small driver (not part of kiln).
#include <gtest/gtest.h>

#include "image/resize.h"

namespace kiln::test {
namespace {

// The source image of every case: a pattern with detail at every scale.
RgbImage pattern(int w, int h) {
  RgbImage img = RgbImage::filled(w, h, {0, 0, 0});
  for (int y = 0; y < h; ++y) {
    for (int x = 0; x < w; ++x) {
      uint8_t* p = img.pixel(x, y);
      p[0] = static_cast<uint8_t>((x * 7 + y * 13) % 256);
      p[1] = static_cast<uint8_t>((x * x + 3 * y) % 256);
      p[2] = static_cast<uint8_t>((x * y + 17) % 256);
    }
  }
  return img;
}

uint64_t fnv1a64(const std::vector<uint8_t>& b) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (uint8_t c : b) h = (h ^ c) * 0x100000001b3ull;
  return h;
}

struct ResizeCase {
  int w, h, out_w, out_h;
  int filter;  // 0 bilinear, 1 bicubic, 2 lanczos (llama.cpp's resize_algo)
  int pad;     // 0 none, 1 ceil, 2 nearest (llama.cpp's pad_style)
  std::array<uint8_t, 3> colour;
  uint64_t hash;                       // FNV-1a 64 of llama.cpp's output
  std::array<uint8_t, 3> first_mid_last;  // its first, middle and last byte
};

// clang-format off
constexpr ResizeCase kCases[] = {
  {300, 200, 224, 224, 0, 1, {0, 0, 0}, 0x5059db6162f8c6bdull, {0, 24, 0}},          // gemma3: shrink + pad
  {100, 150, 224, 224, 1, 1, {122, 116, 104}, 0x7be821fd1de9645bull, {122, 122, 104}},  // llava: grow + pad
  {640, 488, 336, 336, 1, 1, {122, 116, 104}, 0x21c3dbbc5dcd7cf7ull, {122, 121, 104}},
  {57, 31, 13, 29, 0, 0, {0, 0, 0}, 0x2cb02bfa56463d08ull, {16, 114, 98}},           // stretch: shrink x, grow y
  {200, 200, 64, 64, 2, 0, {0, 0, 0}, 0x87116a81565fe35dull, {22, 25, 148}},         // lanczos
  {50, 80, 40, 40, 1, 2, {1, 2, 3}, 0x212e0f1f81bdc0b0ull, {1, 1, 3}},               // nearest padding
  {1, 1, 5, 3, 1, 0, {0, 0, 0}, 0xd618c52574cf8556ull, {0, 0, 17}},
  {224, 224, 224, 224, 0, 1, {0, 0, 0}, 0xf5756ab661072065ull, {0, 176, 82}},        // same size: a copy
  {31, 400, 96, 96, 2, 1, {9, 9, 9}, 0xdd7ef140d6982593ull, {9, 9, 9}},              // tall: side padding
};
// clang-format on

TEST(ImageResize, MatchesLlamaCppByteForByte) {
  for (const ResizeCase& c : kCases) {
    const RgbImage out = resize_to_fit(pattern(c.w, c.h), c.out_w, c.out_h, static_cast<ResizeFilter>(c.filter),
                                       static_cast<PadStyle>(c.pad), c.colour);
    ASSERT_EQ(out.width, c.out_w);
    ASSERT_EQ(out.height, c.out_h);
    ASSERT_EQ(out.pixels.size(), static_cast<size_t>(c.out_w * c.out_h * 3));
    const std::string what = std::to_string(c.w) + "x" + std::to_string(c.h) + " -> " + std::to_string(c.out_w) + "x" +
                             std::to_string(c.out_h) + " filter " + std::to_string(c.filter) + " pad " +
                             std::to_string(c.pad);
    EXPECT_EQ(out.pixels.front(), c.first_mid_last[0]) << what;
    EXPECT_EQ(out.pixels[out.pixels.size() / 2], c.first_mid_last[1]) << what;
    EXPECT_EQ(out.pixels.back(), c.first_mid_last[2]) << what;
    EXPECT_EQ(fnv1a64(out.pixels), c.hash) << what;
  }
}

TEST(ImageResize, PaddingCentresTheImage) {
  // A white 20 x 10 image fitted into 10 x 10 on black: 10 x 5 in rows 2..6.
  const RgbImage out = resize_to_fit(RgbImage::filled(20, 10, {255, 255, 255}), 10, 10, ResizeFilter::Bilinear,
                                     PadStyle::Ceil, {0, 0, 0});
  for (int y = 0; y < 10; ++y) {
    const bool inside = y >= 2 && y < 7;
    EXPECT_EQ(out.pixel(5, y)[0], inside ? 255 : 0) << "row " << y;
  }
}

}  // namespace
}  // namespace kiln::test
