#include "image/resize.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "core/check.h"

namespace kiln {
namespace {

constexpr int kPrecisionBits = 32 - 8 - 2;  // fixed-point fraction: room for 8-bit pixels and sums

double filter_support(ResizeFilter f) {
  switch (f) {
    case ResizeFilter::Bilinear:
      return 1.0;
    case ResizeFilter::Bicubic:
      return 2.0;
    case ResizeFilter::Lanczos:
      return 3.0;
  }
  return 1.0;
}

double sinc(double v) {
  if (v == 0.0) return 1.0;
  const double pv = v * 3.141592653589793238462643383279502884;
  return std::sin(pv) / pv;
}

// The filter's weight at distance x from an output pixel's centre, in input pixels.
double filter_weight(ResizeFilter f, double x) {
  switch (f) {
    case ResizeFilter::Lanczos:
      return (-3.0 <= x && x < 3.0) ? sinc(x) * sinc(x / 3.0) : 0.0;
    case ResizeFilter::Bilinear:
      x = std::fabs(x);
      return x < 1.0 ? 1.0 - x : 0.0;
    case ResizeFilter::Bicubic: {
      constexpr double a = -0.5;
      x = std::fabs(x);
      if (x < 1.0) return ((a + 2.0) * x - (a + 3.0)) * x * x + 1;
      if (x < 2.0) return (((x - 5) * x + 8) * x - 4) * a;
      return 0.0;
    }
  }
  return 0.0;
}

// For each output pixel of one dimension: the first input pixel, how many contribute and their
// fixed-point weights (ksize per output pixel, zero past `count`).
struct Coefficients {
  int ksize = 0;
  std::vector<int> first, count;
  std::vector<int32_t> weight;  // [out][ksize]
};

Coefficients coefficients(int in_size, int out_size, ResizeFilter f) {
  double scale = static_cast<double>(in_size) / out_size;
  const double filterscale = std::max(scale, 1.0);  // widen the filter when shrinking
  const double support = filter_support(f) * filterscale;
  Coefficients c;
  c.ksize = static_cast<int>(std::ceil(support)) * 2 + 1;
  c.first.resize(static_cast<size_t>(out_size));
  c.count.resize(static_cast<size_t>(out_size));
  std::vector<double> w(static_cast<size_t>(out_size) * static_cast<size_t>(c.ksize), 0.0);
  for (int xx = 0; xx < out_size; ++xx) {
    const double center = (xx + 0.5) * scale;
    const double ss = 1.0 / filterscale;
    // Truncation toward zero, as Pillow's (int) cast, then clamped to the image.
    int xmin = static_cast<int>(center - support + 0.5);
    xmin = std::max(xmin, 0);
    int xmax = static_cast<int>(center + support + 0.5);
    xmax = std::min(xmax, in_size) - xmin;
    double* k = &w[static_cast<size_t>(xx) * static_cast<size_t>(c.ksize)];
    double total = 0.0;
    for (int x = 0; x < xmax; ++x) {
      k[x] = filter_weight(f, (x + xmin - center + 0.5) * ss);
      total += k[x];
    }
    if (total != 0.0) {
      for (int x = 0; x < xmax; ++x) k[x] /= total;
    }
    c.first[static_cast<size_t>(xx)] = xmin;
    c.count[static_cast<size_t>(xx)] = xmax;
  }
  // To fixed point: +-0.5 then truncation toward zero (Pillow's rounding).
  const double one = std::ldexp(1.0, kPrecisionBits);
  c.weight.resize(w.size());
  for (size_t i = 0; i < w.size(); ++i) c.weight[i] = static_cast<int32_t>(w[i] * one + (w[i] < 0 ? -0.5 : 0.5));
  return c;
}

uint8_t clip8(int32_t v) { return static_cast<uint8_t>(std::clamp(v, 0, 255)); }

RgbImage resample_width(const RgbImage& src, int out_w, const Coefficients& c) {
  RgbImage dst;
  dst.width = out_w;
  dst.height = src.height;
  dst.pixels.resize(static_cast<size_t>(out_w) * static_cast<size_t>(src.height) * 3);
  for (int32_t y = 0; y < src.height; ++y) {
    for (int xx = 0; xx < out_w; ++xx) {
      const int32_t* k = &c.weight[static_cast<size_t>(xx) * static_cast<size_t>(c.ksize)];
      const uint8_t* p = src.pixel(c.first[static_cast<size_t>(xx)], y);
      int32_t s0 = 1 << (kPrecisionBits - 1), s1 = s0, s2 = s0;
      for (int x = 0; x < c.count[static_cast<size_t>(xx)]; ++x, p += 3) {
        s0 += p[0] * k[x];
        s1 += p[1] * k[x];
        s2 += p[2] * k[x];
      }
      uint8_t* out = dst.pixel(xx, y);
      out[0] = clip8(s0 >> kPrecisionBits);
      out[1] = clip8(s1 >> kPrecisionBits);
      out[2] = clip8(s2 >> kPrecisionBits);
    }
  }
  return dst;
}

RgbImage resample_height(const RgbImage& src, int out_h, const Coefficients& c) {
  RgbImage dst;
  dst.width = src.width;
  dst.height = out_h;
  const size_t row = static_cast<size_t>(src.width) * 3;
  dst.pixels.resize(row * static_cast<size_t>(out_h));
  std::vector<int32_t> acc(row);
  for (int yy = 0; yy < out_h; ++yy) {
    const int32_t* k = &c.weight[static_cast<size_t>(yy) * static_cast<size_t>(c.ksize)];
    std::fill(acc.begin(), acc.end(), 1 << (kPrecisionBits - 1));
    for (int y = 0; y < c.count[static_cast<size_t>(yy)]; ++y) {
      const uint8_t* in = src.pixel(0, c.first[static_cast<size_t>(yy)] + y);
      for (size_t i = 0; i < row; ++i) acc[i] += in[i] * k[y];
    }
    uint8_t* out = dst.pixel(0, yy);
    for (size_t i = 0; i < row; ++i) out[i] = clip8(acc[i] >> kPrecisionBits);
  }
  return dst;
}

}  // namespace

RgbImage resize_image(const RgbImage& src, int32_t width, int32_t height, ResizeFilter filter) {
  KILN_ASSERT(width >= 1 && height >= 1 && src.width >= 1 && src.height >= 1, "resize_image: empty size");
  RgbImage out = width != src.width ? resample_width(src, width, coefficients(src.width, width, filter)) : src;
  if (height != src.height) out = resample_height(out, height, coefficients(src.height, height, filter));
  return out;
}

RgbImage resize_to_fit(const RgbImage& src, int32_t width, int32_t height, ResizeFilter filter, PadStyle pad_style,
                       std::array<uint8_t, 3> pad) {
  if (src.width == width && src.height == height) return src;
  if (pad_style == PadStyle::None) return resize_image(src, width, height, filter);
  // ref: img_tool::resize: the scale in float, the scaled size rounded (up, or to nearest) and
  // capped at the target, the offset halved (rounded down, or to nearest).
  const float scale = std::min(static_cast<float>(width) / static_cast<float>(src.width),
                               static_cast<float>(height) / static_cast<float>(src.height));
  const float sw = static_cast<float>(src.width) * scale, sh = static_cast<float>(src.height) * scale;
  const bool nearest = pad_style == PadStyle::Nearest;
  const int32_t new_w = std::min(static_cast<int32_t>(nearest ? std::round(sw) : std::ceil(sw)), width);
  const int32_t new_h = std::min(static_cast<int32_t>(nearest ? std::round(sh) : std::ceil(sh)), height);
  const RgbImage scaled = resize_image(src, std::max(new_w, 1), std::max(new_h, 1), filter);
  const int32_t off_x = nearest ? static_cast<int32_t>(std::round((width - scaled.width) / 2.0f)) : (width - scaled.width) / 2;
  const int32_t off_y = nearest ? static_cast<int32_t>(std::round((height - scaled.height) / 2.0f)) : (height - scaled.height) / 2;
  RgbImage out = RgbImage::filled(width, height, pad);
  for (int32_t y = 0; y < scaled.height; ++y) {
    std::memcpy(out.pixel(off_x, off_y + y), scaled.pixel(0, y), static_cast<size_t>(scaled.width) * 3);
  }
  return out;
}

}  // namespace kiln
