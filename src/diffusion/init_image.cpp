#include "diffusion/init_image.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <vector>

namespace kiln::diffusion {
namespace {

float srgb_to_linear(uint8_t v) {
  const float c = static_cast<float>(v) / 255.0f;
  return c <= 0.04045f ? c / 12.92f : std::pow((c + 0.055f) / 1.055f, 2.4f);
}

uint8_t linear_to_srgb(float v) {
  const float c = std::clamp(v, 0.0f, 1.0f);
  const float s = c <= 0.0031308f ? c * 12.92f : 1.055f * std::pow(c, 1.0f / 2.4f) - 0.055f;
  return static_cast<uint8_t>(std::lround(s * 255.0f));
}

// One output pixel's input pixels and weights along an axis: [first, first + weights.size()).
struct Taps {
  int32_t first = 0;
  std::vector<float> weights;
};

// The box filter's taps of the `n_out` output pixels over `n_in` input pixels: output pixel o
// covers its own area [o * s, (o + 1) * s) of the input, s = n_in / n_out, each input pixel
// weighted by its overlap, normalised to sum 1 (stb_image_resize's trapezoid box).
std::vector<Taps> box_taps(int32_t n_in, int32_t n_out) {
  const double s = static_cast<double>(n_in) / n_out;
  std::vector<Taps> taps(static_cast<size_t>(n_out));
  for (int32_t o = 0; o < n_out; ++o) {
    const double lo = o * s, hi = (o + 1) * s;
    const auto first = static_cast<int32_t>(std::floor(lo));
    const auto last = static_cast<int32_t>(std::ceil(hi)) - 1;
    Taps& t = taps[static_cast<size_t>(o)];
    t.first = std::clamp(first, 0, n_in - 1);
    std::vector<float> w(static_cast<size_t>(std::clamp(last, 0, n_in - 1) - t.first + 1), 0.0f);
    double sum = 0;
    for (int32_t i = first; i <= last; ++i) {
      const double overlap = std::min(hi, i + 1.0) - std::max(lo, static_cast<double>(i));
      if (overlap <= 0) continue;
      w[static_cast<size_t>(std::clamp(i, 0, n_in - 1) - t.first)] += static_cast<float>(overlap);
      sum += overlap;
    }
    for (float& x : w) x = static_cast<float>(x / sum);
    t.weights = std::move(w);
  }
  return taps;
}

RgbImage crop(const RgbImage& src, int32_t x0, int32_t y0, int32_t w, int32_t h) {
  RgbImage out;
  out.width = w;
  out.height = h;
  out.pixels.resize(static_cast<size_t>(w) * static_cast<size_t>(h) * 3);
  for (int32_t y = 0; y < h; ++y)
    std::copy_n(src.pixel(x0, y0 + y), static_cast<size_t>(w) * 3,
                out.pixels.data() + static_cast<size_t>(y) * w * 3);
  return out;
}

}  // namespace

RgbImage fit_init_image(const RgbImage& src, int32_t width, int32_t height) {
  if (src.width == width && src.height == height) return src;
  // ref: load_image_common's crop to the asked aspect ratio (float arithmetic, truncated).
  const float dst_aspect = static_cast<float>(width) / static_cast<float>(height);
  const float src_aspect = static_cast<float>(src.width) / static_cast<float>(src.height);
  int32_t cw = src.width, ch = src.height;
  if (src_aspect > dst_aspect) cw = static_cast<int32_t>(static_cast<float>(src.height) * dst_aspect);
  if (src_aspect < dst_aspect) ch = static_cast<int32_t>(static_cast<float>(src.width) / dst_aspect);
  cw = std::max(cw, 1);
  ch = std::max(ch, 1);
  const RgbImage c = crop(src, (src.width - cw) / 2, (src.height - ch) / 2, cw, ch);

  // Linear light, then the two separable passes (width first), then back to sRGB.
  std::vector<float> lin(c.pixels.size());
  std::array<float, 256> decode{};
  for (int v = 0; v < 256; ++v) decode[static_cast<size_t>(v)] = srgb_to_linear(static_cast<uint8_t>(v));
  for (size_t i = 0; i < lin.size(); ++i) lin[i] = decode[c.pixels[i]];
  const std::vector<Taps> tx = box_taps(cw, width), ty = box_taps(ch, height);
  std::vector<float> rows(static_cast<size_t>(width) * static_cast<size_t>(ch) * 3, 0.0f);
  for (int32_t y = 0; y < ch; ++y)
    for (int32_t x = 0; x < width; ++x) {
      const Taps& t = tx[static_cast<size_t>(x)];
      for (size_t k = 0; k < t.weights.size(); ++k)
        for (int ch3 = 0; ch3 < 3; ++ch3)
          rows[(static_cast<size_t>(y) * width + x) * 3 + ch3] +=
              t.weights[k] * lin[(static_cast<size_t>(y) * cw + t.first + k) * 3 + ch3];
    }
  RgbImage out;
  out.width = width;
  out.height = height;
  out.pixels.resize(static_cast<size_t>(width) * static_cast<size_t>(height) * 3);
  for (int32_t y = 0; y < height; ++y) {
    const Taps& t = ty[static_cast<size_t>(y)];
    for (int32_t x = 0; x < width; ++x)
      for (int ch3 = 0; ch3 < 3; ++ch3) {
        float v = 0;
        for (size_t k = 0; k < t.weights.size(); ++k)
          v += t.weights[k] * rows[((t.first + k) * static_cast<size_t>(width) + x) * 3 + ch3];
        out.pixels[(static_cast<size_t>(y) * width + x) * 3 + ch3] = linear_to_srgb(v);
      }
  }
  return out;
}

}  // namespace kiln::diffusion
