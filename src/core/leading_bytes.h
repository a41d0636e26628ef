// The first bytes of untrusted input as hex ("89 50 4e 47"), for error messages that say what a
// file that is not of the expected format starts with.
#pragma once

#include <cstdint>
#include <span>
#include <string>

namespace kiln {

// At most the first 8 bytes of `b`, two hex digits each, separated by spaces ("" when empty).
std::string leading_bytes(std::span<const uint8_t> b);

}  // namespace kiln
