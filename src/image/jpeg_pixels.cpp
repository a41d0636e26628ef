#include "image/jpeg_pixels.h"

#include <algorithm>

#include "core/check.h"

namespace kiln::image_detail {
namespace {

// Constants in 12-bit fixed point, rounded as stbi__f2f.
constexpr int fix12(float x) { return static_cast<int>(x * 4096 + 0.5); }

// One 1-D IDCT pass (stb's STBI__IDCT_1D, derived from libjpeg's jidctint): even part in x0..x3,
// odd part in t0..t3, all scaled by 4096.
struct Idct1d {
  int x0, x1, x2, x3, t0, t1, t2, t3;
  Idct1d(int s0, int s1, int s2, int s3, int s4, int s5, int s6, int s7) {
    int p2 = s2, p3 = s6;
    int p1 = (p2 + p3) * fix12(0.5411961f);
    t2 = p1 + p3 * fix12(-1.847759065f);
    t3 = p1 + p2 * fix12(0.765366865f);
    p2 = s0;
    p3 = s4;
    t0 = (p2 + p3) * 4096;
    t1 = (p2 - p3) * 4096;
    x0 = t0 + t3;
    x3 = t0 - t3;
    x1 = t1 + t2;
    x2 = t1 - t2;
    t0 = s7;
    t1 = s5;
    t2 = s3;
    t3 = s1;
    p3 = t0 + t2;
    int p4 = t1 + t3;
    p1 = t0 + t3;
    p2 = t1 + t2;
    const int p5 = (p3 + p4) * fix12(1.175875602f);
    t0 = t0 * fix12(0.298631336f);
    t1 = t1 * fix12(2.053119869f);
    t2 = t2 * fix12(3.072711026f);
    t3 = t3 * fix12(1.501321110f);
    p1 = p5 + p1 * fix12(-0.899976223f);
    p2 = p5 + p2 * fix12(-2.562915447f);
    p3 = p3 * fix12(-1.961570560f);
    p4 = p4 * fix12(-0.390180644f);
    t3 += p1 + p4;
    t2 += p2 + p3;
    t1 += p2 + p4;
    t0 += p1 + p3;
  }
};

uint8_t clamp8(int x) { return static_cast<uint8_t>(std::clamp(x, 0, 255)); }

// Resamplers of one row: `near` is the closer input row, `far` the other (vertical filters);
// w input samples give w * hs outputs. Returns the row to read (maybe `near` itself).
using Resample = const uint8_t* (*)(uint8_t* out, const uint8_t* near, const uint8_t* far, int w, int hs);

const uint8_t* resample_copy(uint8_t*, const uint8_t* near, const uint8_t*, int, int) { return near; }

const uint8_t* resample_v2(uint8_t* out, const uint8_t* near, const uint8_t* far, int w, int) {
  for (int i = 0; i < w; ++i) out[i] = static_cast<uint8_t>((3 * near[i] + far[i] + 2) >> 2);
  return out;
}

const uint8_t* resample_h2(uint8_t* out, const uint8_t* in, const uint8_t*, int w, int) {
  if (w == 1) {
    out[0] = out[1] = in[0];
    return out;
  }
  out[0] = in[0];
  out[1] = static_cast<uint8_t>((in[0] * 3 + in[1] + 2) >> 2);
  int i = 1;
  for (; i < w - 1; ++i) {
    const int n = 3 * in[i] + 2;
    out[i * 2] = static_cast<uint8_t>((n + in[i - 1]) >> 2);
    out[i * 2 + 1] = static_cast<uint8_t>((n + in[i + 1]) >> 2);
  }
  out[i * 2] = static_cast<uint8_t>((in[w - 2] * 3 + in[w - 1] + 2) >> 2);
  out[i * 2 + 1] = in[w - 1];
  return out;
}

const uint8_t* resample_hv2(uint8_t* out, const uint8_t* near, const uint8_t* far, int w, int) {
  if (w == 1) {
    out[0] = out[1] = static_cast<uint8_t>((3 * near[0] + far[0] + 2) >> 2);
    return out;
  }
  int t1 = 3 * near[0] + far[0];
  out[0] = static_cast<uint8_t>((t1 + 2) >> 2);
  for (int i = 1; i < w; ++i) {
    const int t0 = t1;
    t1 = 3 * near[i] + far[i];
    out[i * 2 - 1] = static_cast<uint8_t>((3 * t0 + t1 + 8) >> 4);
    out[i * 2] = static_cast<uint8_t>((3 * t1 + t0 + 8) >> 4);
  }
  out[w * 2 - 1] = static_cast<uint8_t>((t1 + 2) >> 2);
  return out;
}

const uint8_t* resample_nearest(uint8_t* out, const uint8_t* near, const uint8_t*, int w, int hs) {
  for (int i = 0; i < w; ++i) {
    for (int j = 0; j < hs; ++j) out[i * hs + j] = near[i];
  }
  return out;
}

// stbi__YCbCr_to_RGB_row: 20-bit fixed point with 12-bit constants; g's cb term truncated to its
// high 16 bits as stb does, so scalar and SIMD agree.
void ycbcr_to_rgb(uint8_t* out, const uint8_t* y, const uint8_t* cb, const uint8_t* cr, int count) {
  auto fix20 = [](float x) { return static_cast<int>(x * 4096.0f + 0.5f) << 8; };
  for (int i = 0; i < count; ++i, out += 3) {
    const int y_fixed = (y[i] << 20) + (1 << 19);
    const int r_ = cr[i] - 128, b_ = cb[i] - 128;
    const int r = y_fixed + r_ * fix20(1.40200f);
    const int g = y_fixed + (r_ * -fix20(0.71414f)) + static_cast<int>(static_cast<unsigned>(b_ * -fix20(0.34414f)) & 0xffff0000u);
    const int b = y_fixed + b_ * fix20(1.77200f);
    out[0] = clamp8(r >> 20);
    out[1] = clamp8(g >> 20);
    out[2] = clamp8(b >> 20);
  }
}

// x * y / 255 rounded (stbi__blinn_8x8).
uint8_t blinn(uint8_t x, uint8_t y) {
  const unsigned t = static_cast<unsigned>(x) * y + 128;
  return static_cast<uint8_t>((t + (t >> 8)) >> 8);
}

}  // namespace

void jpeg_idct_block(const int16_t coef[64], uint8_t* out, int stride) {
  int val[64];
  // Columns, keeping 2 extra bits; an all-zero AC column is its DC times 4.
  for (int i = 0; i < 8; ++i) {
    const int16_t* d = coef + i;
    int* v = val + i;
    if (d[8] == 0 && d[16] == 0 && d[24] == 0 && d[32] == 0 && d[40] == 0 && d[48] == 0 && d[56] == 0) {
      const int dc = d[0] * 4;
      for (int r = 0; r < 8; ++r) v[r * 8] = dc;
      continue;
    }
    Idct1d c(d[0], d[8], d[16], d[24], d[32], d[40], d[48], d[56]);
    c.x0 += 512, c.x1 += 512, c.x2 += 512, c.x3 += 512;
    v[0] = (c.x0 + c.t3) >> 10;
    v[56] = (c.x0 - c.t3) >> 10;
    v[8] = (c.x1 + c.t2) >> 10;
    v[48] = (c.x1 - c.t2) >> 10;
    v[16] = (c.x2 + c.t1) >> 10;
    v[40] = (c.x2 - c.t1) >> 10;
    v[24] = (c.x3 + c.t0) >> 10;
    v[32] = (c.x3 - c.t0) >> 10;
  }
  // Rows: remove 2^17 with rounding, and shift -128..127 to 0..255.
  for (int i = 0; i < 8; ++i, out += stride) {
    const int* v = val + i * 8;
    Idct1d r(v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7]);
    constexpr int kBias = 65536 + (128 << 17);
    r.x0 += kBias, r.x1 += kBias, r.x2 += kBias, r.x3 += kBias;
    out[0] = clamp8((r.x0 + r.t3) >> 17);
    out[7] = clamp8((r.x0 - r.t3) >> 17);
    out[1] = clamp8((r.x1 + r.t2) >> 17);
    out[6] = clamp8((r.x1 - r.t2) >> 17);
    out[2] = clamp8((r.x2 + r.t1) >> 17);
    out[5] = clamp8((r.x2 - r.t1) >> 17);
    out[3] = clamp8((r.x3 + r.t0) >> 17);
    out[4] = clamp8((r.x3 - r.t0) >> 17);
  }
}

void jpeg_planes_to_rgb(const std::vector<JpegPlane>& planes, int h_max, int v_max, JpegColour colour, RgbImage& out) {
  const int width = out.width, height = out.height;
  const size_t n = colour == JpegColour::Grey ? 1 : planes.size();
  KILN_ASSERT(n >= 1 && n <= planes.size() && planes.size() <= 4, "jpeg: planes do not match the colour space");
  // ref: load_jpeg_image's resample state per component.
  struct Upsampler {
    Resample resample;
    const uint8_t *line0, *line1;
    int hs, vs, ystep, ypos, w_lores;
    std::vector<uint8_t> buf;
  };
  std::vector<Upsampler> up(n);
  for (size_t k = 0; k < n; ++k) {
    const JpegPlane& p = planes[k];
    Upsampler& u = up[k];
    u.hs = h_max / p.h;
    u.vs = v_max / p.v;
    u.ystep = u.vs >> 1;
    u.w_lores = (width + u.hs - 1) / u.hs;
    u.ypos = 0;
    u.line0 = u.line1 = p.samples.data();
    u.buf.resize(static_cast<size_t>(u.w_lores) * static_cast<size_t>(u.hs));
    u.resample = u.hs == 1 && u.vs == 1   ? resample_copy
                 : u.hs == 1 && u.vs == 2 ? resample_v2
                 : u.hs == 2 && u.vs == 1 ? resample_h2
                 : u.hs == 2 && u.vs == 2 ? resample_hv2
                                          : resample_nearest;
  }
  const uint8_t* row[4] = {};
  for (int j = 0; j < height; ++j) {
    for (size_t k = 0; k < n; ++k) {
      Upsampler& u = up[k];
      const bool y_bot = u.ystep >= (u.vs >> 1);
      row[k] = u.resample(u.buf.data(), y_bot ? u.line1 : u.line0, y_bot ? u.line0 : u.line1, u.w_lores, u.hs);
      if (++u.ystep >= u.vs) {
        u.ystep = 0;
        u.line0 = u.line1;
        if (++u.ypos < planes[k].height) u.line1 += planes[k].stride;
      }
    }
    uint8_t* o = out.pixel(0, j);
    switch (colour) {
      case JpegColour::Grey:
        for (int i = 0; i < width; ++i, o += 3) o[0] = o[1] = o[2] = row[0][i];
        break;
      case JpegColour::Rgb:
        for (int i = 0; i < width; ++i, o += 3) o[0] = row[0][i], o[1] = row[1][i], o[2] = row[2][i];
        break;
      case JpegColour::YCbCr:
        ycbcr_to_rgb(o, row[0], row[1], row[2], width);
        break;
      case JpegColour::Cmyk:
        for (int i = 0; i < width; ++i, o += 3) {
          const uint8_t m = row[3][i];
          o[0] = blinn(row[0][i], m), o[1] = blinn(row[1][i], m), o[2] = blinn(row[2][i], m);
        }
        break;
      case JpegColour::Ycck:
        ycbcr_to_rgb(o, row[0], row[1], row[2], width);
        for (int i = 0; i < width; ++i, o += 3) {
          const uint8_t m = row[3][i];
          o[0] = blinn(255 - o[0], m), o[1] = blinn(255 - o[1], m), o[2] = blinn(255 - o[2], m);
        }
        break;
    }
  }
}

}  // namespace kiln::image_detail
