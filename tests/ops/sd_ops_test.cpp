// Stable Diffusion's kernels (issue 34): im2col_2d, group_norm, upscale, tanh and relu against scalar
// references over awkward layouts and sizes, a convolution through im2col_2d and mul_mat against
// a direct one, and their refusals.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>

#include "op_harness.h"

namespace kiln::test {
namespace {

constexpr Layout kLayouts[] = {Layout::Contiguous, Layout::Padded, Layout::Permuted, Layout::Strided0};

struct ConvCase {
  Shape4 src;  // [c, w, h, b]
  Conv2dParams conv;
};

Conv2dParams conv2d(int kw, int kh, int s, int p, int d = 1) {
  Conv2dParams c;
  c.kernel[0] = kw, c.kernel[1] = kh;
  c.stride[0] = c.stride[1] = s;
  c.padding[0] = c.padding[1] = p;
  c.dilation[0] = c.dilation[1] = d;
  return c;
}

const ConvCase kConvCases[] = {
    {{3, 7, 5, 2}, conv2d(3, 3, 1, 1)},     // the UNet's 3x3 same-size convolution
    {{4, 8, 6, 1}, conv2d(3, 3, 2, 1)},     // its downsampling one
    {{2, 5, 5, 1}, conv2d(1, 1, 1, 0)},     // 1x1 (skip connections)
    {{3, 9, 7, 1}, conv2d(3, 2, 1, 2, 2)},  // rectangular, padded past the window, dilated
    {{5, 6, 6, 1}, conv2d(3, 3, 2, 0)},     // no padding: the grid's edge drops
};

TEST(OpsIm2Col2d, ColumnsInTorchWeightOrder) {
  std::mt19937 rng(51);
  for (const ConvCase& cc : kConvCases) {
    const Conv2dParams& c = cc.conv;
    const int64_t ow = c.out_size(0, cc.src[1]), oh = c.out_size(1, cc.src[2]);
    for (Layout l : kLayouts) {
      HostTensor x(DType::F32, cc.src, l);
      HostTensor d(DType::F32, {cc.src[0] * c.kernel[0] * c.kernel[1], ow, oh, cc.src[3]}, Layout::Padded);
      x.fill_uniform(rng, -2, 2);
      OpParams p;
      p.conv2d = c;
      run_checked(make_call(OpKind::Im2Col2d, d, {&x}, p), d);
      expect_near(
          d,
          [&](int64_t col, int64_t ox, int64_t oy, int64_t n) {
            const int64_t i = col % c.kernel[0], j = col / c.kernel[0] % c.kernel[1];
            const int64_t ch = col / (c.kernel[0] * c.kernel[1]);
            const int64_t sx = ox * c.stride[0] + i * c.dilation[0] - c.padding[0];
            const int64_t sy = oy * c.stride[1] + j * c.dilation[1] - c.padding[1];
            if (sx < 0 || sy < 0 || sx >= cc.src[1] || sy >= cc.src[2]) return 0.0;
            return x.get(ch, sx, sy, n);
          },
          0, 0, std::string("im2col_2d ") + layout_name(l));
    }
  }
}

// im2col_2d then mul_mat with a [C_out, C, kh, kw] weight is the convolution; with an F16 weight
// the columns are rounded to F16 (as ggml's F16 im2col), with an F32 weight they stay F32.
TEST(OpsIm2Col2d, MulMatOfTheColumnsIsTheConvolution) {
  std::mt19937 rng(52);
  for (const ConvCase& cc : kConvCases) {
    for (DType wt : {DType::F32, DType::F16}) {
      const Conv2dParams& c = cc.conv;
      const int64_t cin = cc.src[0], cout = 6, taps = c.kernel[0] * c.kernel[1];
      const int64_t ow = c.out_size(0, cc.src[1]), oh = c.out_size(1, cc.src[2]);
      HostTensor x(DType::F32, cc.src);
      HostTensor w(wt, {cin * taps, cout, 1, 1});
      x.fill_uniform(rng, -1, 1);
      w.fill_uniform(rng, -1, 1);
      HostTensor cols(DType::F32, {cin * taps, ow, oh, cc.src[3]});
      OpParams p;
      p.conv2d = c;
      run_checked(make_call(OpKind::Im2Col2d, cols, {&x}, p), cols);
      HostTensor flat(DType::F32, {cin * taps, ow * oh * cc.src[3], 1, 1});
      for (int64_t r = 0; r < ow * oh * cc.src[3]; ++r)
        for (int64_t k = 0; k < cin * taps; ++k)
          flat.set(k, r, 0, 0, cols.get(k, r % ow, r / ow % oh, r / (ow * oh)));
      HostTensor y(DType::F32, {cout, ow * oh * cc.src[3], 1, 1});
      run_checked(make_call(OpKind::MulMat, y, {&w, &flat}), y);
      const auto round_in = [&](double v) {
        return wt == DType::F16 ? double{round_f16(static_cast<float>(v))} : v;
      };
      expect_near(
          y,
          [&](int64_t oc, int64_t pix, int64_t, int64_t) {
            const int64_t ox = pix % ow, oy = pix / ow % oh, n = pix / (ow * oh);
            double sum = 0;
            for (int64_t ch = 0; ch < cin; ++ch)
              for (int64_t j = 0; j < c.kernel[1]; ++j)
                for (int64_t i = 0; i < c.kernel[0]; ++i) {
                  const int64_t sx = ox * c.stride[0] + i * c.dilation[0] - c.padding[0];
                  const int64_t sy = oy * c.stride[1] + j * c.dilation[1] - c.padding[1];
                  if (sx < 0 || sy < 0 || sx >= cc.src[1] || sy >= cc.src[2]) continue;
                  sum += w.get((ch * c.kernel[1] + j) * c.kernel[0] + i, oc) * round_in(x.get(ch, sx, sy, n));
                }
            return sum;
          },
          1e-5, 1e-5, std::string("conv2d ") + std::string(dtype_name(wt)));
    }
  }
}

TEST(OpsIm2Col2d, RefusesWindowsThatDoNotFitAndWrongShapes) {
  HostTensor x(DType::F32, {3, 2, 2, 1});
  OpParams p;
  p.conv2d = conv2d(3, 3, 1, 0);
  HostTensor d(DType::F32, {27, 1, 1, 1});
  Status st = check_kernel(make_call(OpKind::Im2Col2d, d, {&x}, p));
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.error().message.find("does not fit"), std::string::npos) << st.error().message;
  p.conv2d = conv2d(3, 3, 1, 1);
  HostTensor wrong(DType::F32, {27, 2, 3, 1});
  st = check_kernel(make_call(OpKind::Im2Col2d, wrong, {&x}, p));
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.error().message.find("[27, 2, 2, 1]"), std::string::npos) << st.error().message;
  p.conv2d.stride[1] = 0;
  HostTensor ok_dst(DType::F32, {27, 2, 2, 1});
  EXPECT_FALSE(kernel_supported(make_call(OpKind::Im2Col2d, ok_dst, {&x}, p)));
  p.conv2d = conv2d(3, 3, 1, 1);
  HostTensor f16_dst(DType::F16, {27, 2, 2, 1});
  EXPECT_FALSE(kernel_supported(make_call(OpKind::Im2Col2d, f16_dst, {&x}, p)));
  EXPECT_TRUE(kernel_supported(make_call(OpKind::Im2Col2d, ok_dst, {&x}, p)));
}

TEST(OpsGroupNorm, EachGroupOverItsChannelsAndTheGrid) {
  std::mt19937 rng(53);
  struct Case {
    Shape4 ne;
    int groups;
  };
  // 32 groups of the UNet's widths, groups that do not divide the channels (ggml's ceil: the last
  // group shorter, 10 channels in 4 groups of 3, 3, 3, 1; 7 in 5 of 2 leaves the fifth empty),
  // one group (a layer norm over the grid), a batch of two.
  for (const Case& c : {Case{{64, 5, 3, 1}, 32}, Case{{10, 4, 3, 2}, 4}, Case{{7, 3, 3, 1}, 5},
                        Case{{6, 2, 2, 1}, 1}, Case{{32, 1, 1, 1}, 32}}) {
    for (Layout l : kLayouts) {
      HostTensor x(DType::F32, c.ne, l), d(DType::F32, c.ne, Layout::Padded);
      x.fill_uniform(rng, -3, 5);
      OpParams p;
      p.groups = c.groups;
      p.eps = 1e-6f;
      run_checked(make_call(OpKind::GroupNorm, d, {&x}, p), d);
      const int64_t per = (c.ne[0] + c.groups - 1) / c.groups;
      // The element-wise reference: each value normalized by its group's statistics.
      expect_near(
          d,
          [&](int64_t ch, int64_t xx0, int64_t y0, int64_t n) {
            const int64_t c0 = ch / per * per, c1 = std::min(c0 + per, c.ne[0]);
            double sum = 0, sum2 = 0;
            const double count = static_cast<double>((c1 - c0) * c.ne[1] * c.ne[2]);
            for (int64_t y = 0; y < c.ne[2]; ++y)
              for (int64_t xx = 0; xx < c.ne[1]; ++xx)
                for (int64_t k = c0; k < c1; ++k) sum += x.get(k, xx, y, n);
            const double mean = sum / count;
            for (int64_t y = 0; y < c.ne[2]; ++y)
              for (int64_t xx = 0; xx < c.ne[1]; ++xx)
                for (int64_t k = c0; k < c1; ++k) {
                  const double v = x.get(k, xx, y, n) - mean;
                  sum2 += v * v;
                }
            return (x.get(ch, xx0, y0, n) - mean) / std::sqrt(sum2 / count + 1e-6);
          },
          2e-6, 2e-6, "group_norm " + std::to_string(c.groups) + " groups " + layout_name(l));
    }
  }
}

TEST(OpsGroupNorm, RefusesBadGroupCountsAndShapes) {
  HostTensor x(DType::F32, {8, 2, 2, 1}), d(DType::F32, {8, 2, 2, 1});
  OpParams p;
  p.eps = 1e-6f;
  for (int groups : {0, -1, 9}) {
    p.groups = groups;
    const Status st = check_kernel(make_call(OpKind::GroupNorm, d, {&x}, p));
    ASSERT_FALSE(st.ok()) << groups;
    EXPECT_NE(st.error().message.find("8 channels"), std::string::npos) << st.error().message;
  }
  p.groups = 4;
  HostTensor wrong(DType::F32, {8, 2, 3, 1});
  EXPECT_FALSE(kernel_supported(make_call(OpKind::GroupNorm, wrong, {&x}, p)));
  EXPECT_TRUE(kernel_supported(make_call(OpKind::GroupNorm, d, {&x}, p)));
}

TEST(OpsTanhRelu, ElementwiseAsGgml) {
  std::mt19937 rng(55);
  for (Layout l : kLayouts) {
    HostTensor x(DType::F32, {37, 3, 2, 1}, l), d(DType::F32, {37, 3, 2, 1}, Layout::Padded);
    x.fill_uniform(rng, -6, 6);
    x.set(0, 0, 0, 0, 0.0);
    run_checked(make_call(OpKind::Tanh, d, {&x}), d);
    expect_near(
        d, [&](int64_t a, int64_t b, int64_t c, int64_t e) { return std::tanh(x.get(a, b, c, e)); }, 1e-7, 1e-6,
        std::string("tanh ") + layout_name(l));
    run_checked(make_call(OpKind::Relu, d, {&x}), d);
    expect_near(
        d, [&](int64_t a, int64_t b, int64_t c, int64_t e) { return std::max(x.get(a, b, c, e), 0.0); }, 0, 0,
        std::string("relu ") + layout_name(l));
  }
  HostTensor x(DType::F32, {4, 1, 1, 1}), wrong(DType::F32, {5, 1, 1, 1});
  EXPECT_FALSE(kernel_supported(make_call(OpKind::Tanh, wrong, {&x})));
  EXPECT_FALSE(kernel_supported(make_call(OpKind::Relu, wrong, {&x})));
}

TEST(OpsUpscale, NearestCellOfEachOutputCell) {
  std::mt19937 rng(54);
  for (int f : {1, 2, 3}) {
    for (Layout l : kLayouts) {
      HostTensor x(DType::F32, {5, 3, 2, 2}, l), d(DType::F32, {5, 3 * f, 2 * f, 2}, Layout::Padded);
      x.fill_uniform(rng, -1, 1);
      OpParams p;
      p.scale_factor = f;
      run_checked(make_call(OpKind::Upscale, d, {&x}, p), d);
      expect_near(
          d, [&](int64_t c, int64_t ox, int64_t oy, int64_t n) { return x.get(c, ox / f, oy / f, n); }, 0, 0,
          "upscale x" + std::to_string(f) + " " + layout_name(l));
    }
  }
  HostTensor x(DType::F32, {5, 3, 2, 1}), d(DType::F32, {5, 6, 3, 1});
  OpParams p;
  p.scale_factor = 2;
  const Status st = check_kernel(make_call(OpKind::Upscale, d, {&x}, p));
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.error().message.find("times 2"), std::string::npos) << st.error().message;
  p.scale_factor = 0;
  EXPECT_FALSE(kernel_supported(make_call(OpKind::Upscale, d, {&x}, p)));
}

}  // namespace
}  // namespace kiln::test
