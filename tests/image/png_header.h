// A PNG that is only a signature and an IHDR chunk claiming width x height (8-bit RGB, CRC left
// zero): for tests that image sizes are checked before any pixel memory is allocated. Header-only,
// so that the image, fault and server test binaries share it.
#pragma once

#include <cstdint>
#include <string>

namespace kiln::test {

inline std::string png_header_only(uint32_t width, uint32_t height) {
  std::string b("\x89PNG\r\n\x1a\n\0\0\0\x0dIHDR", 16);
  for (uint32_t v : {width, height})
    for (int s = 24; s >= 0; s -= 8) b += static_cast<char>(v >> s);
  b += std::string("\x08\x02\0\0\0\0\0\0\0", 9);  // depth, colour type, methods, CRC
  return b;
}

}  // namespace kiln::test
