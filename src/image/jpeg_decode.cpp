// JPEG through libjpeg-turbo, from memory. libjpeg reports errors by longjmp: the frame that
// calls setjmp (JpegReader::read) holds no C++ object with a destructor across libjpeg calls.
//
// libjpeg decodes a truncated file by padding it (with a warning): kiln refuses it instead.
// Progressive files are decoded scan by scan; a file with more scans than kMaxScans (a cheap way
// to make a small file cost minutes) is refused.
#include <cstdio>
#include <csetjmp>
// clang-format off: jpeglib.h needs <cstdio> before it.
#include <jerror.h>
#include <jpeglib.h>
// clang-format on

#include <cstring>

#include "image/decoders.h"

namespace kiln::image_detail {
namespace {

constexpr int kMaxScans = 500;  // as libjpeg-turbo's TJFLAG_LIMITSCANS

struct JpegErrors {
  jpeg_error_mgr mgr;  // first: libjpeg hands back a pointer to it
  jmp_buf jump;
  bool truncated = false;
  char message[JMSG_LENGTH_MAX] = {};
};

[[noreturn]] void on_error(j_common_ptr c) {
  auto* e = reinterpret_cast<JpegErrors*>(c->err);
  (*c->err->format_message)(c, e->message);
  std::longjmp(e->jump, 1);
}

// Warnings (level -1) are corrupt-data notices libjpeg recovers from; the one that matters is
// the end of the data before the end of the image. Trace messages (level >= 0) are ignored.
void on_message(j_common_ptr c, int level) {
  auto* e = reinterpret_cast<JpegErrors*>(c->err);
  if (level < 0 && c->err->msg_code == JWRN_JPEG_EOF) e->truncated = true;
}

struct ScanLimit {
  jpeg_progress_mgr mgr;  // first: libjpeg hands back a pointer to it
  JpegErrors* errors = nullptr;
};

void on_progress(j_common_ptr c) {
  auto* limit = reinterpret_cast<ScanLimit*>(c->progress);
  auto* d = reinterpret_cast<j_decompress_ptr>(c);
  if (d->input_scan_number > kMaxScans) {
    std::snprintf(limit->errors->message, sizeof limit->errors->message,
                  "more than %d progressive scans", kMaxScans);
    std::longjmp(limit->errors->jump, 1);
  }
}

enum class Stage { Header, Pixels };

class JpegReader {
 public:
  JpegReader() {
    cinfo_.err = jpeg_std_error(&errors_.mgr);
    errors_.mgr.error_exit = on_error;
    errors_.mgr.emit_message = on_message;
    limit_.mgr.progress_monitor = on_progress;
    limit_.errors = &errors_;
  }
  ~JpegReader() {
    if (created_) jpeg_destroy_decompress(&cinfo_);
  }
  JpegReader(const JpegReader&) = delete;
  JpegReader& operator=(const JpegReader&) = delete;

  const JpegErrors& errors() const { return errors_; }
  const jpeg_decompress_struct& info() const { return cinfo_; }

  // Reads the header (Stage::Header) or, after it, the pixels into `img`, already sized to the
  // header's width x height (Stage::Pixels); false on a libjpeg error (see errors()).
  bool read(std::span<const uint8_t> bytes, Stage stage, RgbImage* img, int64_t memory_limit) {
    if (setjmp(errors_.jump)) return false;
    if (stage == Stage::Header) {
      jpeg_create_decompress(&cinfo_);
      created_ = true;
      cinfo_.progress = &limit_.mgr;
      cinfo_.mem->max_memory_to_use = static_cast<long>(memory_limit);
      jpeg_mem_src(&cinfo_, bytes.data(), static_cast<unsigned long>(bytes.size()));
      if (jpeg_read_header(&cinfo_, TRUE) != JPEG_HEADER_OK) ERREXIT(&cinfo_, JERR_NO_IMAGE);
      return true;
    }
    cinfo_.out_color_space = JCS_RGB;
    jpeg_start_decompress(&cinfo_);
    if (cinfo_.output_components != 3 || cinfo_.output_width != static_cast<JDIMENSION>(img->width) ||
        cinfo_.output_height != static_cast<JDIMENSION>(img->height)) {
      std::snprintf(errors_.message, sizeof errors_.message, "the decoder's output is not %d x %d RGB", img->width,
                    img->height);
      return false;
    }
    while (cinfo_.output_scanline < cinfo_.output_height) {
      JSAMPROW row = img->pixel(0, static_cast<int32_t>(cinfo_.output_scanline));
      jpeg_read_scanlines(&cinfo_, &row, 1);
    }
    jpeg_finish_decompress(&cinfo_);
    return true;
  }

 private:
  jpeg_decompress_struct cinfo_{};
  JpegErrors errors_;
  ScanLimit limit_{};
  bool created_ = false;
};

}  // namespace

Result<RgbImage> decode_jpeg(std::span<const uint8_t> bytes, const ImageLimits& limits) {
  // libjpeg's working memory (progressive files hold every coefficient: about 6 bytes per pixel
  // at most) is capped a little above what the pixel limit allows.
  const int64_t memory_limit = limits.max_pixels * 8 + (int64_t{64} << 20);
  JpegReader reader;
  if (!reader.read(bytes, Stage::Header, nullptr, memory_limit)) {
    if (reader.errors().truncated) return make_error("image: truncated JPEG: ", bytes.size(), " bytes end inside the header");
    return make_error("image: corrupt JPEG: ", reader.errors().message);
  }
  const jpeg_decompress_struct& info = reader.info();
  KILN_TRY(check_image_size("JPEG", info.image_width, info.image_height, limits));
  if (info.jpeg_color_space == JCS_CMYK || info.jpeg_color_space == JCS_YCCK)
    return make_error("image: CMYK JPEG is not supported (RGB, YCbCr and greyscale JPEGs are)");
  RgbImage img;
  img.width = static_cast<int32_t>(info.image_width);
  img.height = static_cast<int32_t>(info.image_height);
  img.pixels.resize(static_cast<size_t>(img.width) * static_cast<size_t>(img.height) * 3);
  const bool decoded = reader.read(bytes, Stage::Pixels, &img, memory_limit);
  if (reader.errors().truncated)
    return make_error("image: truncated JPEG: the data ends after ", bytes.size(), " bytes, before the image does");
  if (!decoded) return make_error("image: corrupt JPEG: ", reader.errors().message);
  return img;
}

}  // namespace kiln::image_detail
