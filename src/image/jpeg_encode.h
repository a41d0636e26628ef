// JPEG encoding through libjpeg-turbo: an 8-bit RGB image to the bytes of a baseline JFIF file at a
// given quality (4:2:0 chroma, libjpeg's defaults), with an optional EXIF UserComment as A1111 writes
// its generation parameters into a JPEG (piexif: an APP1 "Exif" segment, a big-endian TIFF whose
// IFD0 points to an Exif IFD holding UserComment, tag 0x9286, type UNDEFINED: "UNICODE\0" then the
// text in UTF-16 big-endian).
// Thread-safety: reentrant.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/result.h"
#include "image/image.h"

namespace kiln {

// The APP1 segment's payload (from "Exif\0\0") for `comment` (UTF-8; invalid bytes become U+FFFD).
// Errors: a comment whose segment would exceed JPEG's 65533-byte marker limit.
Result<std::vector<uint8_t>> exif_user_comment(const std::string& comment);

// image: width and height in [1, 65500], pixels of width * height * 3 bytes; quality in [1, 100].
// user_comment: written as EXIF when not empty. Errors: a bad size or quality, a comment too long
// for one segment, libjpeg's own.
Result<std::vector<uint8_t>> encode_jpeg(const RgbImage& image, int quality, const std::string& user_comment);

}  // namespace kiln
