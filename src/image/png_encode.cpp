// libpng reports errors by longjmp: the frame that calls setjmp (PngWriter::write) holds no C++
// object with a destructor across libpng calls; the output and the row pointers are the caller's.
#include "image/png_encode.h"

#include <png.h>

#include <cstdio>
#include <cstring>

namespace kiln {
namespace {

struct PngSink {
  std::vector<uint8_t>* out = nullptr;
  char message[256] = {};  // libpng's error, saved before the longjmp
};

void write_bytes(png_structp png, png_bytep data, size_t n) {
  auto* sink = static_cast<PngSink*>(png_get_io_ptr(png));
  sink->out->insert(sink->out->end(), data, data + n);
}

void flush(png_structp) {}

void on_error(png_structp png, png_const_charp msg) {
  auto* sink = static_cast<PngSink*>(png_get_error_ptr(png));
  std::snprintf(sink->message, sizeof sink->message, "%s", msg);
  png_longjmp(png, 1);
}

void on_warning(png_structp, png_const_charp) {}

class PngWriter {
 public:
  explicit PngWriter(PngSink& sink) : sink_(sink) {
    png_ = png_create_write_struct(PNG_LIBPNG_VER_STRING, &sink, on_error, on_warning);
    if (png_ != nullptr) info_ = png_create_info_struct(png_);
  }
  ~PngWriter() { png_destroy_write_struct(&png_, info_ != nullptr ? &info_ : nullptr); }
  PngWriter(const PngWriter&) = delete;
  PngWriter& operator=(const PngWriter&) = delete;

  bool created() const { return png_ != nullptr && info_ != nullptr; }

  // Writes the whole file; false on a libpng error (the message is in the sink).
  bool write(const RgbImage& image, std::vector<png_bytep>& rows, std::vector<png_text>& texts) {
    if (setjmp(png_jmpbuf(png_))) return false;
    png_set_write_fn(png_, &sink_, write_bytes, flush);
    png_set_IHDR(png_, info_, static_cast<png_uint_32>(image.width), static_cast<png_uint_32>(image.height),
                 8, PNG_COLOR_TYPE_RGB, PNG_INTERLACE_NONE, PNG_COMPRESSION_TYPE_DEFAULT,
                 PNG_FILTER_TYPE_DEFAULT);
    if (!texts.empty()) png_set_text(png_, info_, texts.data(), static_cast<int>(texts.size()));
    png_write_info(png_, info_);
    png_write_image(png_, rows.data());
    png_write_end(png_, nullptr);
    return true;
  }

 private:
  PngSink& sink_;
  png_structp png_ = nullptr;
  png_infop info_ = nullptr;
};

Status check_keyword(const std::string& keyword) {
  if (keyword.empty() || keyword.size() > 79)
    return make_error("png: a text keyword has 1 to 79 characters, not ", keyword.size());
  for (const unsigned char c : keyword) {
    if (c < 32 || (c > 126 && c < 161))
      return make_error("png: the text keyword '", keyword, "' is not printable Latin-1");
  }
  return ok_status();
}

}  // namespace

Result<std::vector<uint8_t>> encode_png(const RgbImage& image, const std::vector<PngText>& texts) {
  if (image.width < 1 || image.height < 1 ||
      image.pixels.size() != static_cast<size_t>(image.width) * static_cast<size_t>(image.height) * 3)
    return make_error("png: an image of ", image.width, " x ", image.height, " pixels with ",
                      image.pixels.size(), " bytes");
  std::vector<png_text> chunks(texts.size());
  for (size_t i = 0; i < texts.size(); ++i) {
    KILN_TRY(check_keyword(texts[i].keyword));
    if (texts[i].text.find('\0') != std::string::npos)
      return make_error("png: the text '", texts[i].keyword, "' holds a NUL byte");
    chunks[i].compression = PNG_TEXT_COMPRESSION_NONE;
    chunks[i].key = const_cast<char*>(texts[i].keyword.c_str());  // libpng only reads them
    chunks[i].text = const_cast<char*>(texts[i].text.c_str());
    chunks[i].text_length = texts[i].text.size();
  }
  std::vector<png_bytep> rows(static_cast<size_t>(image.height));
  for (int32_t y = 0; y < image.height; ++y)
    rows[static_cast<size_t>(y)] = const_cast<png_bytep>(image.pixel(0, y));
  std::vector<uint8_t> out;
  PngSink sink;
  sink.out = &out;
  PngWriter writer(sink);
  if (!writer.created()) return make_error("png: cannot create a PNG writer (out of memory)");
  if (!writer.write(image, rows, chunks)) return make_error("png: ", sink.message);
  return out;
}

}  // namespace kiln
