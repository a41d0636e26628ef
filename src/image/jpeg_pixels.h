// Internal to src/image: a JPEG's pixels from its dequantized DCT coefficients with stb_image's
// arithmetic (stbi__idct_block, its chroma upsamplers and fixed-point YCbCr conversion), so that
// kiln's JPEG pixels equal llama.cpp's, which decodes with stb_image. libjpeg-turbo parses the
// file and entropy-decodes the coefficients (image/jpeg_decode.cpp); this file only reconstructs.
// ref: stb_image.h v2.30 (load_jpeg_image, stbi__idct_block, stbi__resample_row_*,
// stbi__YCbCr_to_RGB_row, stbi__blinn_8x8).
#pragma once

#include <cstdint>
#include <vector>

#include "image/image.h"

namespace kiln::image_detail {

// One component's samples after the inverse DCT, at its own resolution.
struct JpegPlane {
  int h = 1, v = 1;           // sampling factors
  int width = 0, height = 0;  // samples it covers: ceil(image size * factor / max factor)
  int stride = 0;             // bytes per row: whole 8x8 blocks
  std::vector<uint8_t> samples;  // [rows of whole blocks][stride]
};

// The 8x8 inverse DCT of dequantized coefficients (natural order) into 8 rows of `out`, `stride`
// bytes apart, level-shifted by 128 and clamped to 0..255.
void jpeg_idct_block(const int16_t coef[64], uint8_t* out, int stride);

enum class JpegColour : uint8_t {
  Grey,   // one component, replicated
  YCbCr,
  Rgb,    // components stored as R, G, B
  Cmyk,   // Adobe, inverted
  Ycck,   // Adobe YCCK
};

// Upsamples the planes (h_max / v_max: the largest sampling factors) to width x height and converts
// them to RGB into `out` (already sized), as stb_image does when asked for 3 channels.
void jpeg_planes_to_rgb(const std::vector<JpegPlane>& planes, int h_max, int v_max, JpegColour colour, RgbImage& out);

}  // namespace kiln::image_detail
