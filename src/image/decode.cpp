#include "image/decode.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "core/leading_bytes.h"
#include "image/decoders.h"

namespace kiln {
namespace {

bool starts_with(std::span<const uint8_t> b, std::string_view sig, size_t at = 0) {
  return b.size() >= at + sig.size() && std::memcmp(b.data() + at, sig.data(), sig.size()) == 0;
}

// SVG is text: after an optional UTF-8 byte-order mark and white space comes markup, and an
// "<svg" element within the first few kilobytes.
bool looks_like_svg(std::span<const uint8_t> b) {
  size_t i = starts_with(b, "\xEF\xBB\xBF") ? 3 : 0;
  while (i < b.size() && (b[i] == ' ' || b[i] == '\t' || b[i] == '\r' || b[i] == '\n')) ++i;
  if (i >= b.size() || b[i] != '<') return false;
  const std::string_view head(reinterpret_cast<const char*>(b.data()) + i, std::min<size_t>(b.size() - i, 4096));
  return head.find("<svg") != std::string_view::npos;
}

std::string format_display_name(std::string_view f) {
  std::string s(f);
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return static_cast<char>(std::toupper(c)); });
  return s;
}

}  // namespace

RgbImage RgbImage::filled(int32_t width, int32_t height, std::array<uint8_t, 3> rgb) {
  RgbImage img;
  img.width = width;
  img.height = height;
  img.pixels.resize(static_cast<size_t>(width) * static_cast<size_t>(height) * 3);
  for (size_t i = 0; i < img.pixels.size(); i += 3) std::memcpy(&img.pixels[i], rgb.data(), 3);
  return img;
}

std::string_view sniff_image_format(std::span<const uint8_t> b) {
  if (starts_with(b, "\x89PNG\r\n\x1a\n")) return "png";
  if (starts_with(b, "\xFF\xD8\xFF")) return "jpeg";
  if (starts_with(b, "GIF87a") || starts_with(b, "GIF89a")) return "gif";
  if (starts_with(b, "RIFF") && starts_with(b, "WEBP", 8)) return "webp";
  if (starts_with(b, "BM")) return "bmp";
  if (starts_with(b, std::string_view("II*\0", 4)) || starts_with(b, std::string_view("MM\0*", 4))) return "tiff";
  if (starts_with(b, "8BPS")) return "psd";
  if (starts_with(b, std::string_view("\0\0\1\0", 4))) return "ico";
  if (starts_with(b, "qoif")) return "qoi";
  if (starts_with(b, "\xFF\x0A") || starts_with(b, std::string_view("\0\0\0\x0CJXL ", 8))) return "jpeg xl";
  if (starts_with(b, std::string_view("\0\0\0\x0CjP  ", 8))) return "jpeg 2000";
  if (starts_with(b, "ftyp", 4)) {
    for (std::string_view brand : {"avif", "avis"})
      if (starts_with(b, brand, 8)) return "avif";
    for (std::string_view brand : {"heic", "heix", "hevc", "mif1", "msf1"})
      if (starts_with(b, brand, 8)) return "heif";
  }
  if (starts_with(b, "%PDF")) return "pdf";
  if (looks_like_svg(b)) return "svg";
  return "";
}

Result<RgbImage> decode_image(std::span<const uint8_t> bytes, const ImageLimits& limits) {
  if (bytes.empty()) return make_error("image: no data (0 bytes)");
  const std::string_view format = sniff_image_format(bytes);
  if (format == "png") return image_detail::decode_png(bytes, limits);
  if (format == "jpeg") return image_detail::decode_jpeg(bytes, limits);
  if (!format.empty())
    return make_error("image: ", format_display_name(format), " is not supported (PNG and JPEG images are)");
  return make_error("image: not a PNG or JPEG file (it starts with bytes ", leading_bytes(bytes), ")");
}

namespace image_detail {

Status check_image_size(const char* format, int64_t width, int64_t height, const ImageLimits& limits) {
  if (width <= 0 || height <= 0)
    return make_error("image: ", format, " header gives an empty size of ", width, " x ", height, " pixels");
  if (width > limits.max_side || height > limits.max_side)
    return make_error("image: ", format, " of ", width, " x ", height, " pixels exceeds the limit of ",
                      limits.max_side, " pixels per side");
  if (width * height > limits.max_pixels)
    return make_error("image: ", format, " of ", width, " x ", height, " pixels exceeds the limit of ",
                      limits.max_pixels, " pixels");
  return ok_status();
}

Status admit_image(int64_t width, int64_t height, const ImageLimits& limits) {
  if (!limits.admit) return ok_status();
  if (Status admitted = limits.admit(width, height); !admitted.ok()) return make_error("image: ", admitted.error().message);
  return ok_status();
}

}  // namespace image_detail
}  // namespace kiln
