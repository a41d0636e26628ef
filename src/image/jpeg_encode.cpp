// libjpeg reports errors by longjmp: the frame that calls setjmp (compress) holds no C++ object with
// a destructor across libjpeg calls; the output buffer is libjpeg's (jpeg_mem_dest), copied out and
// freed after.
#include "image/jpeg_encode.h"

#include <csetjmp>
#include <cstdio>
// clang-format off: jpeglib.h needs <cstdio> before it.
#include <jpeglib.h>
// clang-format on

#include <cstdlib>

namespace kiln {
namespace {

constexpr size_t kMaxMarkerPayload = 65533;  // a marker's length field counts itself (2 bytes)

// The code points of UTF-8 `s`; a byte that starts no valid sequence gives U+FFFD.
std::vector<uint32_t> code_points(const std::string& s) {
  std::vector<uint32_t> out;
  for (size_t i = 0; i < s.size();) {
    const auto b = static_cast<uint8_t>(s[i]);
    const int n = b < 0x80 ? 1 : (b >> 5) == 6 ? 2 : (b >> 4) == 14 ? 3 : (b >> 3) == 30 ? 4 : 0;
    uint32_t cp = n == 1 ? b : n == 2 ? b & 0x1fu : n == 3 ? b & 0x0fu : b & 0x07u;
    bool ok = n > 0 && i + static_cast<size_t>(n) <= s.size();
    for (int k = 1; ok && k < n; ++k) {
      const auto c = static_cast<uint8_t>(s[i + static_cast<size_t>(k)]);
      ok = (c >> 6) == 2;
      cp = (cp << 6) | (c & 0x3fu);
    }
    const uint32_t min[] = {0, 0, 0x80, 0x800, 0x10000};
    ok = ok && cp >= min[n] && cp <= 0x10ffff && (cp < 0xd800 || cp > 0xdfff);
    out.push_back(ok ? cp : 0xfffd);
    i += ok ? static_cast<size_t>(n) : 1;
  }
  return out;
}

void put16(std::vector<uint8_t>& v, uint32_t x) {
  v.push_back(static_cast<uint8_t>(x >> 8));
  v.push_back(static_cast<uint8_t>(x));
}

void put32(std::vector<uint8_t>& v, uint32_t x) {
  put16(v, x >> 16);
  put16(v, x & 0xffff);
}

struct JpegErrors {
  jpeg_error_mgr mgr;  // first: libjpeg hands back a pointer to it
  jmp_buf jump;
  char message[JMSG_LENGTH_MAX] = {};
};

[[noreturn]] void on_error(j_common_ptr c) {
  auto* e = reinterpret_cast<JpegErrors*>(c->err);
  (*c->err->format_message)(c, e->message);
  std::longjmp(e->jump, 1);
}

// Compresses into *buf / *size (libjpeg's malloc'd buffer, the caller frees); false on an error.
bool compress(jpeg_compress_struct& cinfo, JpegErrors& errors, const RgbImage& image, int quality,
              const std::vector<uint8_t>& app1, unsigned char** buf, unsigned long* size) {
  if (setjmp(errors.jump)) return false;
  jpeg_create_compress(&cinfo);
  jpeg_mem_dest(&cinfo, buf, size);
  cinfo.image_width = static_cast<JDIMENSION>(image.width);
  cinfo.image_height = static_cast<JDIMENSION>(image.height);
  cinfo.input_components = 3;
  cinfo.in_color_space = JCS_RGB;
  jpeg_set_defaults(&cinfo);
  jpeg_set_quality(&cinfo, quality, TRUE);
  jpeg_start_compress(&cinfo, TRUE);
  if (!app1.empty())
    jpeg_write_marker(&cinfo, JPEG_APP0 + 1, app1.data(), static_cast<unsigned>(app1.size()));
  const size_t stride = static_cast<size_t>(image.width) * 3;
  while (cinfo.next_scanline < cinfo.image_height) {
    JSAMPROW row = const_cast<JSAMPROW>(image.pixels.data() + cinfo.next_scanline * stride);
    jpeg_write_scanlines(&cinfo, &row, 1);
  }
  jpeg_finish_compress(&cinfo);
  return true;
}

}  // namespace

Result<std::vector<uint8_t>> exif_user_comment(const std::string& comment) {
  // The comment: "UNICODE\0" then UTF-16 big-endian (piexif.helper.UserComment.dump, "unicode").
  std::vector<uint8_t> value = {'U', 'N', 'I', 'C', 'O', 'D', 'E', 0};
  for (uint32_t cp : code_points(comment)) {
    if (cp < 0x10000) {
      put16(value, cp);
    } else {
      put16(value, 0xd800 + ((cp - 0x10000) >> 10));
      put16(value, 0xdc00 + ((cp - 0x10000) & 0x3ff));
    }
  }
  // "Exif\0\0", then a big-endian TIFF: header (8), IFD0 at 8 with one entry (ExifIFD pointer, 18
  // bytes), the Exif IFD at 26 with one entry (UserComment), the value at 44.
  std::vector<uint8_t> seg = {'E', 'x', 'i', 'f', 0, 0, 'M', 'M', 0, 42};
  put32(seg, 8);
  put16(seg, 1);
  put16(seg, 0x8769);  // ExifIFD, LONG, 1, offset 26
  put16(seg, 4);
  put32(seg, 1);
  put32(seg, 26);
  put32(seg, 0);  // no next IFD
  put16(seg, 1);
  put16(seg, 0x9286);  // UserComment, UNDEFINED, count, offset 44
  put16(seg, 7);
  put32(seg, static_cast<uint32_t>(value.size()));
  put32(seg, 44);
  put32(seg, 0);
  seg.insert(seg.end(), value.begin(), value.end());
  if (seg.size() > kMaxMarkerPayload)
    return make_error("jpeg: the EXIF comment takes ", seg.size(),
                      " bytes, more than one JPEG segment holds (", kMaxMarkerPayload, ")");
  return seg;
}

Result<std::vector<uint8_t>> encode_jpeg(const RgbImage& image, int quality,
                                         const std::string& user_comment) {
  if (image.width < 1 || image.height < 1 || image.width > 65500 || image.height > 65500 ||
      image.pixels.size() != static_cast<size_t>(image.width) * static_cast<size_t>(image.height) * 3)
    return make_error("jpeg: an image of ", image.width, " x ", image.height, " with ", image.pixels.size(),
                      " bytes (each side in [1, 65500], 3 bytes a pixel)");
  if (quality < 1 || quality > 100) return make_error("jpeg: quality ", quality, " is not in [1, 100]");
  std::vector<uint8_t> app1;
  if (!user_comment.empty()) {
    KILN_ASSIGN_OR_RETURN(app1, exif_user_comment(user_comment));
  }
  jpeg_compress_struct cinfo{};
  JpegErrors errors;
  cinfo.err = jpeg_std_error(&errors.mgr);
  errors.mgr.error_exit = on_error;
  unsigned char* buf = nullptr;
  unsigned long size = 0;
  const bool ok = compress(cinfo, errors, image, quality, app1, &buf, &size);
  jpeg_destroy_compress(&cinfo);
  std::vector<uint8_t> out;
  if (ok) out.assign(buf, buf + size);
  std::free(buf);
  if (!ok) return make_error("jpeg: ", errors.message);
  return out;
}

}  // namespace kiln
