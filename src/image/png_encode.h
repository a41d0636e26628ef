// PNG encoding through libpng: an 8-bit RGB image and text chunks (tEXt, Latin-1 keyword and text,
// as A1111 and sd-cli write their `parameters`) to the bytes of a PNG file.
// Thread-safety: reentrant.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/result.h"
#include "image/image.h"

namespace kiln {

struct PngText {
  std::string keyword;  // 1 to 79 printable Latin-1 characters
  std::string text;     // written as is (a tEXt chunk holds no NUL)
};

// image: width and height at least 1, pixels of width * height * 3 bytes. Errors: a bad size or
// keyword, a text holding a NUL, libpng's own.
Result<std::vector<uint8_t>> encode_png(const RgbImage& image, const std::vector<PngText>& texts);

}  // namespace kiln
