// Decoding image files (PNG, JPEG) from untrusted bytes into RgbImage.
//
// The file's header is read first and its size checked against ImageLimits, and against the bytes
// present (a JPEG needs a bit per 8x8 block, a PNG a byte per 1032 of its pixels' bytes), before
// any pixel memory is allocated, so a 30000 x 30000 header costs nothing; the decoders' own working memory
// is bounded too (libpng's ancillary-chunk limits, libjpeg's memory limit and a cap on
// progressive scans). Channels are converted as llama.cpp's stb_image does when asked for 3
// channels: alpha dropped (not composited), grey replicated, palettes expanded, 16-bit samples cut
// to their high byte; gamma and colour profiles are ignored.
//
// Libraries: Debian's libpng and libjpeg-turbo (maintained and fuzzed parsers for hostile input).
// Pixels equal llama.cpp's (which decodes with stb_image): PNG samples are exact either way; JPEG
// coefficients come from libjpeg-turbo and become pixels with stb_image's arithmetic
// (image/jpeg_pixels.h), since libjpeg's own IDCT, upsampling and colour rounding differ.
//
// Errors read "image: what went wrong", naming the format and the problem: a format kiln does
// not read (SVG, GIF, WebP, BMP, ...), a truncated or corrupt file (any warning libjpeg gives), a
// size over the limits or the bytes present,
// 12-bit or fractionally subsampled JPEGs.
// Thread-safety: decode_image is reentrant.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string_view>

#include "core/result.h"
#include "image/image.h"

namespace kiln {

struct ImageLimits {
  int64_t max_side = 16384;             // pixels along either side
  int64_t max_pixels = int64_t{1} << 26;  // width * height (64 Mi pixels: 192 MiB as RGB)
  // Called with the declared size once the header is read and checked against the limits and the
  // bytes present, before the decoder allocates pixels; its Error refuses the image. The caller
  // bounds the memory of decodes in flight with it (see serve/memory_gate.h). Optional.
  std::function<Status(int64_t width, int64_t height)> admit = nullptr;
};

// The format the bytes announce, by their signature: "png", "jpeg", or the name of a format kiln
// recognises but does not decode ("svg", "gif", "webp", ...), or "" when unknown.
std::string_view sniff_image_format(std::span<const uint8_t> bytes);

Result<RgbImage> decode_image(std::span<const uint8_t> bytes, const ImageLimits& limits = {});

}  // namespace kiln
