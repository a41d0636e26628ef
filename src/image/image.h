// RgbImage: 8-bit RGB pixels, what decode_image() returns and the vision encoders' preprocessing
// reads and writes. Row-major, 3 bytes per pixel (R, G, B), no row padding.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace kiln {

struct RgbImage {
  int32_t width = 0;
  int32_t height = 0;
  std::vector<uint8_t> pixels;  // [height][width][3]

  // A width x height image of one colour.
  static RgbImage filled(int32_t width, int32_t height, std::array<uint8_t, 3> rgb);
  const uint8_t* pixel(int32_t x, int32_t y) const {
    return pixels.data() + (static_cast<size_t>(y) * static_cast<size_t>(width) + static_cast<size_t>(x)) * 3;
  }
  uint8_t* pixel(int32_t x, int32_t y) {
    return pixels.data() + (static_cast<size_t>(y) * static_cast<size_t>(width) + static_cast<size_t>(x)) * 3;
  }
};

}  // namespace kiln
