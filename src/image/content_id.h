// The identity of an image's bytes: their SHA-256, hex-encoded (64 characters), as llama.cpp's
// mtmd helper ids images. A cryptographic hash, because caches keyed by it are shared by clients:
// nobody can make two images with one id.
// Thread-safety: pure function.
#pragma once

#include <cstdint>
#include <span>
#include <string>

namespace kiln {

std::string content_id(std::span<const uint8_t> bytes);

}  // namespace kiln
