// Test images written with libpng and libjpeg (the writers of the libraries kiln decodes with),
// in every layout the decoders must handle, plus byte-level helpers to damage them.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace kiln::test {

struct PngSpec {
  int width = 4, height = 3;
  int color_type = 2;  // PNG_COLOR_TYPE_*: 0 grey, 2 RGB, 3 palette, 4 grey+alpha, 6 RGBA
  int bit_depth = 8;   // 1, 2, 4, 8, 16 as the colour type allows
  bool interlaced = false;
  bool transparency = false;  // a tRNS chunk (palette: one alpha per entry; grey/RGB: one colour)
};

// A PNG whose samples come from png_sample(spec, x, y, channel) (see below), channel-interleaved.
std::vector<uint8_t> write_png(const PngSpec& spec);
// The sample of channel c at (x, y) in a PNG of `spec`, in the image's bit depth; for palette
// images the palette index (the palette maps index i to RGB (i*37, 255 - i*11, i*5) mod 256).
uint32_t png_sample(const PngSpec& spec, int x, int y, int c);
// The RGB stb_image gives for that pixel with 3 channels requested (what kiln must decode).
void expected_rgb(const PngSpec& spec, int x, int y, uint8_t rgb[3]);

// A JPEG of smooth gradients (quality 95): greyscale or YCbCr 4:2:0, baseline or progressive.
std::vector<uint8_t> write_jpeg(int width, int height, bool grey, bool progressive);
// The gradient the JPEG writer encodes at (x, y).
void jpeg_source_rgb(int width, int height, int x, int y, uint8_t rgb[3]);

// Offset of the first chunk of type `tag` ("IDAT") in a PNG, or npos.
size_t png_chunk_offset(const std::vector<uint8_t>& png, const char* tag);

}  // namespace kiln::test
