// diffusion/init_image.h: an init image brought to -W x -H as sd-cli brings it: the same size is a
// copy, another aspect ratio is cropped about the centre, and the resize averages in linear light.
#include "diffusion/init_image.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

namespace kiln::diffusion {
namespace {

RgbImage image(int32_t w, int32_t h, std::vector<uint8_t> gray) {
  RgbImage img;
  img.width = w;
  img.height = h;
  for (uint8_t v : gray) img.pixels.insert(img.pixels.end(), {v, v, v});
  return img;
}

TEST(InitImage, SameSizeIsACopy) {
  const RgbImage src = image(2, 2, {0, 7, 200, 255});
  EXPECT_EQ(fit_init_image(src, 2, 2).pixels, src.pixels);
}

TEST(InitImage, AnotherAspectRatioIsCroppedAboutTheCentre) {
  // 4x2 to 2x2: the middle two columns, unchanged (a crop to the size asked needs no resize).
  const RgbImage src = image(4, 2, {10, 20, 30, 40, 50, 60, 70, 80});
  EXPECT_EQ(fit_init_image(src, 2, 2).pixels, image(2, 2, {20, 30, 60, 70}).pixels);
  // 2x4 to 1x1: the middle 2x2, then averaged.
  const RgbImage tall = image(2, 4, {0, 0, 90, 90, 90, 90, 255, 255});
  EXPECT_EQ(fit_init_image(tall, 1, 1).pixels, image(1, 1, {90}).pixels);
}

TEST(InitImage, HalvingAveragesInLinearLight) {
  // A 2x2 checkerboard of black and white is half the light: sRGB 188, not 128.
  EXPECT_EQ(fit_init_image(image(2, 2, {0, 255, 255, 0}), 1, 1).pixels, image(1, 1, {188}).pixels);
  // Doubling repeats each pixel where the footprint lies inside it.
  const RgbImage up = fit_init_image(image(2, 1, {0, 255}), 4, 2);
  EXPECT_EQ(up.pixels, image(4, 2, {0, 0, 255, 255, 0, 0, 255, 255}).pixels);
}

}  // namespace
}  // namespace kiln::diffusion
