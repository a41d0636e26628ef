#include "test_images.h"

#include <png.h>

#include <cstdio>
#include <cstring>
// clang-format off: jpeglib.h needs <cstdio> before it.
#include <jpeglib.h>
// clang-format on

namespace kiln::test {
namespace {

void append_bytes(png_structp png, png_bytep data, size_t n) {
  auto* out = static_cast<std::vector<uint8_t>*>(png_get_io_ptr(png));
  out->insert(out->end(), data, data + n);
}
void flush_nothing(png_structp) {}

int channels_of(int color_type) {
  switch (color_type) {
    case 0:
    case 3:
      return 1;
    case 4:
      return 2;
    case 2:
      return 3;
    default:
      return 4;
  }
}

}  // namespace

uint32_t png_sample(const PngSpec& s, int x, int y, int c) {
  const uint32_t max = (1u << s.bit_depth) - 1;
  if (s.color_type == 3) return static_cast<uint32_t>(x * 5 + y * 3) % std::min<uint32_t>(max + 1, 200);
  return static_cast<uint32_t>(x * 2654435761u + y * 40503u + c * 977u + 12345u) % (max + 1);
}

void expected_rgb(const PngSpec& s, int x, int y, uint8_t rgb[3]) {
  // stb_image: 16-bit samples keep their high byte; 1/2/4-bit grey scales to 8 bits; grey is
  // replicated; alpha is dropped; a palette index gives its RGB entry.
  auto to8 = [&](uint32_t v) -> uint8_t {
    switch (s.bit_depth) {
      case 16:
        return static_cast<uint8_t>(v >> 8);
      case 8:
        return static_cast<uint8_t>(v);
      case 4:
        return static_cast<uint8_t>(v * 0x11);
      case 2:
        return static_cast<uint8_t>(v * 0x55);
      default:
        return static_cast<uint8_t>(v * 0xff);
    }
  };
  if (s.color_type == 3) {
    const uint32_t i = png_sample(s, x, y, 0);
    rgb[0] = static_cast<uint8_t>(i * 37);
    rgb[1] = static_cast<uint8_t>(255 - i * 11);
    rgb[2] = static_cast<uint8_t>(i * 5);
    return;
  }
  const bool grey = s.color_type == 0 || s.color_type == 4;
  for (int c = 0; c < 3; ++c) rgb[c] = to8(png_sample(s, x, y, grey ? 0 : c));
}

std::vector<uint8_t> write_png(const PngSpec& s) {
  std::vector<uint8_t> out;
  png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, nullptr, nullptr, nullptr);
  png_infop info = png_create_info_struct(png);
  png_set_write_fn(png, &out, append_bytes, flush_nothing);
  png_set_IHDR(png, info, static_cast<png_uint_32>(s.width), static_cast<png_uint_32>(s.height), s.bit_depth,
               s.color_type, s.interlaced ? PNG_INTERLACE_ADAM7 : PNG_INTERLACE_NONE, PNG_COMPRESSION_TYPE_DEFAULT,
               PNG_FILTER_TYPE_DEFAULT);
  std::vector<png_color> palette(256);
  std::vector<png_byte> alphas(256);
  if (s.color_type == 3) {
    const int n = 1 << s.bit_depth;
    for (int i = 0; i < n; ++i) {
      palette[static_cast<size_t>(i)] = {static_cast<png_byte>(i * 37), static_cast<png_byte>(255 - i * 11),
                                         static_cast<png_byte>(i * 5)};
      alphas[static_cast<size_t>(i)] = static_cast<png_byte>(i * 3);
    }
    png_set_PLTE(png, info, palette.data(), n);
    if (s.transparency) png_set_tRNS(png, info, alphas.data(), n, nullptr);
  } else if (s.transparency) {
    png_color_16 colour{};
    colour.red = colour.green = colour.blue = colour.gray = 1;
    png_set_tRNS(png, info, nullptr, 0, &colour);
  }
  png_write_info(png, info);
  const int ch = channels_of(s.color_type);
  std::vector<std::vector<png_byte>> rows(static_cast<size_t>(s.height));
  std::vector<png_bytep> row_ptrs;
  for (int y = 0; y < s.height; ++y) {
    // Pack samples MSB first at the bit depth (16-bit big-endian).
    std::vector<png_byte>& r = rows[static_cast<size_t>(y)];
    r.assign(static_cast<size_t>((s.width * ch * s.bit_depth + 7) / 8), 0);
    int bit = 0;
    for (int x = 0; x < s.width; ++x) {
      for (int c = 0; c < ch; ++c, bit += s.bit_depth) {
        const uint32_t v = png_sample(s, x, y, c);
        if (s.bit_depth == 16) {
          r[static_cast<size_t>(bit / 8)] = static_cast<png_byte>(v >> 8);
          r[static_cast<size_t>(bit / 8 + 1)] = static_cast<png_byte>(v);
        } else {
          r[static_cast<size_t>(bit / 8)] |= static_cast<png_byte>(v << (8 - s.bit_depth - bit % 8));
        }
      }
    }
    row_ptrs.push_back(r.data());
  }
  png_write_image(png, row_ptrs.data());
  png_write_end(png, nullptr);
  png_destroy_write_struct(&png, &info);
  return out;
}

void jpeg_source_rgb(int width, int height, int x, int y, uint8_t rgb[3]) {
  rgb[0] = static_cast<uint8_t>(x * 255 / std::max(width - 1, 1));
  rgb[1] = static_cast<uint8_t>(y * 255 / std::max(height - 1, 1));
  rgb[2] = static_cast<uint8_t>((x + y) * 255 / std::max(width + height - 2, 1));
}

namespace {

std::vector<uint8_t> compress(int width, int height, J_COLOR_SPACE in_space, int components, bool progressive) {
  jpeg_compress_struct cinfo{};
  jpeg_error_mgr jerr{};
  cinfo.err = jpeg_std_error(&jerr);
  jpeg_create_compress(&cinfo);
  unsigned char* mem = nullptr;
  unsigned long size = 0;
  jpeg_mem_dest(&cinfo, &mem, &size);
  cinfo.image_width = static_cast<JDIMENSION>(width);
  cinfo.image_height = static_cast<JDIMENSION>(height);
  cinfo.input_components = components;
  cinfo.in_color_space = in_space;
  jpeg_set_defaults(&cinfo);
  jpeg_set_quality(&cinfo, 95, TRUE);
  if (progressive) jpeg_simple_progression(&cinfo);
  jpeg_start_compress(&cinfo, TRUE);
  std::vector<JSAMPLE> row(static_cast<size_t>(width * components));
  while (cinfo.next_scanline < cinfo.image_height) {
    const int y = static_cast<int>(cinfo.next_scanline);
    for (int x = 0; x < width; ++x) {
      uint8_t rgb[3];
      jpeg_source_rgb(width, height, x, y, rgb);
      for (int c = 0; c < components; ++c) row[static_cast<size_t>(x * components + c)] = rgb[c];
    }
    JSAMPROW p = row.data();
    jpeg_write_scanlines(&cinfo, &p, 1);
  }
  jpeg_finish_compress(&cinfo);
  std::vector<uint8_t> out(mem, mem + size);
  jpeg_destroy_compress(&cinfo);
  free(mem);
  return out;
}

}  // namespace

std::vector<uint8_t> write_jpeg(int width, int height, bool grey, bool progressive) {
  return compress(width, height, grey ? JCS_GRAYSCALE : JCS_RGB, grey ? 1 : 3, progressive);
}


size_t png_chunk_offset(const std::vector<uint8_t>& png, const char* tag) {
  size_t off = 8;
  while (off + 8 <= png.size()) {
    const uint32_t len = (uint32_t{png[off]} << 24) | (uint32_t{png[off + 1]} << 16) | (uint32_t{png[off + 2]} << 8) | png[off + 3];
    if (std::memcmp(&png[off + 4], tag, 4) == 0) return off;
    off += 12 + len;
  }
  return std::string::npos;
}

}  // namespace kiln::test
