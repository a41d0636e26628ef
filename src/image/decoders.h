// Internal to src/image: one decoder per format behind decode_image() (image/decode.h), each given
// bytes that carry its signature. Same contract as decode_image().
#pragma once

#include <span>

#include "core/result.h"
#include "image/decode.h"

namespace kiln::image_detail {

Result<RgbImage> decode_png(std::span<const uint8_t> bytes, const ImageLimits& limits);
Result<RgbImage> decode_jpeg(std::span<const uint8_t> bytes, const ImageLimits& limits);

// "image: <FORMAT> of W x H pixels exceeds ..." when the size breaks `limits`, else ok.
Status check_image_size(const char* format, int64_t width, int64_t height, const ImageLimits& limits);
// limits.admit's answer for the size (ok without one); its Error as "image: <its message>".
Status admit_image(int64_t width, int64_t height, const ImageLimits& limits);

}  // namespace kiln::image_detail
