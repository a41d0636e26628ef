// Resizing 8-bit RGB images as llama.cpp's mtmd preprocessing does (img_tool::resize in
// tools/mtmd/mtmd-image.cpp), which follows Pillow's PIL.Image.resize: separable filters (width
// first, then height), weights normalised per output pixel and held in fixed point with 22
// fractional bits, sums rounded and clamped to 0..255 after each pass.
// Thread-safety: pure functions.
#pragma once

#include <array>
#include <cstdint>

#include "image/image.h"

namespace kiln {

enum class ResizeFilter : uint8_t {
  Bilinear,  // triangle, support 1
  Bicubic,   // Keys cubic with a = -0.5 (Pillow's), support 2
  Lanczos,   // Lanczos-3, support 3
};

// How resize_to_fit places an image of another aspect ratio.
enum class PadStyle : uint8_t {
  None,     // stretch to the target size
  Ceil,     // keep the aspect ratio: scaled size rounded up, centred (offset rounded down), padded
  Nearest,  // keep the aspect ratio: scaled size and offset rounded to nearest, padded
};

// `src` resampled to width x height (both >= 1). A size equal to the source's skips that pass.
RgbImage resize_image(const RgbImage& src, int32_t width, int32_t height, ResizeFilter filter);

// `src` brought to exactly width x height: a copy when the size already matches, else resized
// with `filter` and, unless PadStyle::None, placed on a `pad` background keeping its aspect ratio.
RgbImage resize_to_fit(const RgbImage& src, int32_t width, int32_t height, ResizeFilter filter, PadStyle pad_style,
                       std::array<uint8_t, 3> pad);

}  // namespace kiln
