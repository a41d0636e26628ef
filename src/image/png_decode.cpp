// PNG through libpng, from memory. libpng reports errors by longjmp: the frame that calls setjmp
// (PngReader::read) holds no C++ object with a destructor across libpng calls; the image and the
// row pointers belong to the caller.
#include <png.h>

#include <cstdio>
#include <cstring>
#include <vector>

#include "image/decoders.h"

namespace kiln::image_detail {
namespace {

constexpr size_t kSignatureBytes = 8;
constexpr png_alloc_size_t kChunkMallocMax = 8u << 20;  // largest ancillary chunk libpng will hold
constexpr png_uint_32 kChunkCacheMax = 1000;            // most ancillary chunks libpng will keep
constexpr int64_t kMaxDeflateRatio = 1032;              // deflate's largest expansion of one byte

struct PngSource {
  std::span<const uint8_t> bytes;
  size_t pos = 0;
  const char* stage = "header";  // where reading is, for messages
  bool truncated = false;
  char message[256] = {};  // libpng's error, saved before the longjmp
};

void read_bytes(png_structp png, png_bytep out, size_t n) {
  auto* src = static_cast<PngSource*>(png_get_io_ptr(png));
  if (n > src->bytes.size() - src->pos) {
    src->truncated = true;
    png_error(png, "truncated");
  }
  std::memcpy(out, src->bytes.data() + src->pos, n);
  src->pos += n;
}

void on_error(png_structp png, png_const_charp msg) {
  auto* src = static_cast<PngSource*>(png_get_error_ptr(png));
  std::snprintf(src->message, sizeof src->message, "%s", msg);
  png_longjmp(png, 1);
}

// Problems in ancillary chunks (a bad CRC, an odd profile): libpng skips the chunk; so do we.
void on_warning(png_structp, png_const_charp) {}

uint32_t big_endian_u32(const uint8_t* p) {
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | uint32_t{p[3]};
}

class PngReader {
 public:
  explicit PngReader(PngSource& src) : src_(src) {
    png_ = png_create_read_struct(PNG_LIBPNG_VER_STRING, &src, on_error, on_warning);
    if (png_ != nullptr) info_ = png_create_info_struct(png_);
  }
  ~PngReader() { png_destroy_read_struct(&png_, info_ != nullptr ? &info_ : nullptr, nullptr); }
  PngReader(const PngReader&) = delete;
  PngReader& operator=(const PngReader&) = delete;

  bool created() const { return png_ != nullptr && info_ != nullptr; }

  // Decodes the whole file into `img` (already sized width x height) through `rows`; false on a
  // libpng error (the message is in the source).
  bool read(RgbImage& img, std::vector<png_bytep>& rows, const ImageLimits& limits) {
    if (setjmp(png_jmpbuf(png_))) return false;
    png_set_read_fn(png_, &src_, read_bytes);
    png_set_user_limits(png_, static_cast<png_uint_32>(limits.max_side), static_cast<png_uint_32>(limits.max_side));
    png_set_chunk_cache_max(png_, kChunkCacheMax);
    png_set_chunk_malloc_max(png_, kChunkMallocMax);
    png_read_info(png_, info_);
    if (png_get_image_width(png_, info_) != static_cast<png_uint_32>(img.width) ||
        png_get_image_height(png_, info_) != static_cast<png_uint_32>(img.height))
      png_error(png_, "IHDR changed between reads");
    const int color = png_get_color_type(png_, info_);
    const int depth = png_get_bit_depth(png_, info_);
    // stb_image's conversions to 3 channels (see image/decode.h).
    if (color == PNG_COLOR_TYPE_PALETTE) png_set_palette_to_rgb(png_);
    if (color == PNG_COLOR_TYPE_GRAY && depth < 8) png_set_expand_gray_1_2_4_to_8(png_);
    if (depth == 16) png_set_strip_16(png_);
    if (color == PNG_COLOR_TYPE_GRAY || color == PNG_COLOR_TYPE_GRAY_ALPHA) png_set_gray_to_rgb(png_);
    png_set_strip_alpha(png_);
    png_set_interlace_handling(png_);
    png_read_update_info(png_, info_);
    if (png_get_rowbytes(png_, info_) != static_cast<size_t>(img.width) * 3)
      png_error(png_, "unexpected row size after conversion to RGB");
    for (int32_t y = 0; y < img.height; ++y) rows[static_cast<size_t>(y)] = img.pixel(0, y);
    src_.stage = "image data";
    png_read_image(png_, rows.data());
    src_.stage = "end of the file (IEND)";
    png_read_end(png_, nullptr);
    return true;
  }

 private:
  PngSource& src_;
  png_structp png_ = nullptr;
  png_infop info_ = nullptr;
};

}  // namespace

Result<RgbImage> decode_png(std::span<const uint8_t> bytes, const ImageLimits& limits) {
  // The size comes from IHDR, the first chunk: checked before libpng allocates anything.
  if (bytes.size() < kSignatureBytes + 8 + 13)
    return make_error("image: truncated PNG: ", bytes.size(), " bytes end inside the header");
  const uint8_t* ihdr = bytes.data() + kSignatureBytes;
  if (big_endian_u32(ihdr) != 13 || std::memcmp(ihdr + 4, "IHDR", 4) != 0)
    return make_error("image: corrupt PNG: the first chunk is not a 13-byte IHDR");
  const int64_t width = big_endian_u32(ihdr + 8), height = big_endian_u32(ihdr + 12);
  KILN_TRY(check_image_size("PNG", width, height, limits));
  // The pixels' bits (IHDR's bit depth times the colour type's samples) come out of deflate, which
  // expands a byte into at most kMaxDeflateRatio: a file too small for its size is refused before
  // anything is allocated.
  const int samples = ihdr[17] == 2 ? 3 : ihdr[17] == 4 ? 2 : ihdr[17] == 6 ? 4 : 1;
  const int64_t data_bytes = width * height * ihdr[16] * samples / 8;
  if (static_cast<int64_t>(bytes.size()) < data_bytes / kMaxDeflateRatio)
    return make_error("image: corrupt PNG: ", bytes.size(), " bytes cannot hold ", width, " x ", height,
                      " pixels (at least ", data_bytes / kMaxDeflateRatio, ")");
  KILN_TRY(admit_image(width, height, limits));

  PngSource src;
  src.bytes = bytes;
  PngReader reader(src);
  if (!reader.created()) return make_error("image: cannot create a PNG reader (out of memory)");
  RgbImage img;
  img.width = static_cast<int32_t>(width);
  img.height = static_cast<int32_t>(height);
  img.pixels.resize(static_cast<size_t>(width) * static_cast<size_t>(height) * 3);
  std::vector<png_bytep> rows(static_cast<size_t>(height));
  if (!reader.read(img, rows, limits)) {
    if (src.truncated)
      return make_error("image: truncated PNG: the data ends after ", bytes.size(), " bytes, inside the ", src.stage);
    return make_error("image: corrupt PNG (", src.stage, "): ", src.message);
  }
  return img;
}

}  // namespace kiln::image_detail
