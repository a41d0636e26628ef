#include "core/leading_bytes.h"

#include <algorithm>
#include <cstdio>

namespace kiln {

std::string leading_bytes(std::span<const uint8_t> b) {
  std::string s;
  char hex[4];
  for (size_t i = 0; i < std::min<size_t>(b.size(), 8); ++i) {
    std::snprintf(hex, sizeof hex, "%s%02x", i ? " " : "", b[i]);
    s += hex;
  }
  return s;
}

}  // namespace kiln
