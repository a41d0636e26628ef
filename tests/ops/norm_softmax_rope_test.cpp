// RmsNorm, LayerNorm, SoftMax (masks, ALiBi) and Rope (normal / neox, partial rotation, YaRN,
// frequency factors) against double-precision references.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "op_harness.h"

namespace kiln::test {
namespace {

constexpr Layout kLayouts[] = {Layout::Contiguous, Layout::Padded, Layout::Permuted, Layout::Strided0};

TEST(OpsNorm, RmsNormAndLayerNorm) {
  std::mt19937 rng(10);
  const Shape4 shapes[] = {{1, 1, 1, 1}, {7, 3, 1, 1}, {33, 5, 2, 2}, {4096, 2, 1, 1}};
  for (const Shape4& ne : shapes) {
    for (Layout l : kLayouts) {
      HostTensor x(DType::F32, ne, l),
          d(DType::F32, ne, l == Layout::Padded ? Layout::Permuted : Layout::Padded);
      x.fill_uniform(rng, 1.5, 4.0);  // a large mean: layer norm must center first
      const std::string where = std::string(" ") + layout_name(l) + " ne0=" + std::to_string(ne[0]);
      for (OpKind kind : {OpKind::RmsNorm, OpKind::LayerNorm}) {
        OpParams p;
        p.eps = 1e-5f;
        run_checked(make_call(kind, d, {&x}, p), d);
        // Per row: the center (mean for layer norm, 0 for rms norm) and 1 / sqrt(E[(x - c)^2] + eps).
        std::vector<std::pair<double, double>> stats;
        for (int64_t i3 = 0; i3 < ne[3]; ++i3)
          for (int64_t i2 = 0; i2 < ne[2]; ++i2)
            for (int64_t i1 = 0; i1 < ne[1]; ++i1) {
              double mean = 0, sq = 0;
              for (int64_t i = 0; i < ne[0]; ++i) mean += x.get(i, i1, i2, i3);
              mean /= static_cast<double>(ne[0]);
              const double center = kind == OpKind::LayerNorm ? mean : 0.0;
              for (int64_t i = 0; i < ne[0]; ++i) sq += std::pow(x.get(i, i1, i2, i3) - center, 2);
              stats.emplace_back(center, 1.0 / std::sqrt(sq / static_cast<double>(ne[0]) + 1e-5));
            }
        expect_near(
            d,
            [&](int64_t i0, int64_t i1, int64_t i2, int64_t i3) {
              const auto& [center, inv] = stats[static_cast<size_t>((i3 * ne[2] + i2) * ne[1] + i1)];
              return (x.get(i0, i1, i2, i3) - center) * inv;
            },
            2e-5, 2e-5, std::string(op_name(kind)) + where);
      }
    }
  }
}

TEST(OpsNorm, RmsNormInPlace) {
  std::mt19937 rng(11);
  HostTensor x(DType::F32, {19, 4, 1, 1}, Layout::Padded);
  x.fill_uniform(rng, -1, 1);
  std::vector<double> src;
  for (int64_t i1 = 0; i1 < 4; ++i1)
    for (int64_t i0 = 0; i0 < 19; ++i0) src.push_back(x.get(i0, i1));
  OpParams p;
  p.eps = 1e-6f;
  run_checked(make_call(OpKind::RmsNorm, x, {&x}, p), x);
  expect_near(
      x,
      [&](int64_t i0, int64_t i1, int64_t, int64_t) {
        double sq = 0;
        for (int64_t i = 0; i < 19; ++i) sq += src[i1 * 19 + i] * src[i1 * 19 + i];
        return src[i1 * 19 + i0] / std::sqrt(sq / 19 + 1e-6);
      },
      1e-5, 1e-5, "rms_norm in place");
}

// The bits of a float as stored in a test tensor (get() widens to double exactly).
uint32_t bits_at(const HostTensor& t, int64_t i0, int64_t i1, int64_t i2, int64_t i3) {
  const float f = static_cast<float>(t.get(i0, i1, i2, i3));
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}

// RmsNormMul against its definition, RmsNorm into a tensor then Mul: every value bit for bit, for
// odd rows, every weight broadcast Mul allows (rows, planes, a repeating dim 0), strided layouts
// and in place. run_checked also splits the rows over 3 threads.
TEST(OpsNorm, RmsNormMulIsRmsNormThenMulBitForBit) {
  struct Case {
    Shape4 x, w;
  };
  const Case cases[] = {
      {{1, 1, 1, 1}, {1, 1, 1, 1}},       {{7, 3, 1, 1}, {7, 1, 1, 1}},   {{33, 5, 2, 2}, {33, 1, 1, 1}},
      {{33, 5, 2, 2}, {33, 5, 1, 1}},     {{33, 5, 2, 2}, {33, 1, 2, 1}}, {{33, 5, 2, 2}, {33, 5, 2, 2}},
      {{33, 5, 2, 2}, {11, 1, 1, 2}},     {{33, 5, 2, 2}, {1, 1, 1, 1}},  {{64, 70, 1, 1}, {64, 1, 1, 1}},
      {{4097, 3, 1, 1}, {4097, 1, 1, 1}},
  };
  std::mt19937 rng(13);
  int differs_from_one_rounding = 0;
  for (const Case& c : cases) {
    for (Layout l : kLayouts) {
      const Layout wl = l == Layout::Strided0 ? Layout::Strided0 : Layout::Contiguous;
      HostTensor x(DType::F32, c.x, l), w(DType::F32, c.w, wl), normed(DType::F32, c.x),
          want(DType::F32, c.x),
          got(DType::F32, c.x, l == Layout::Padded ? Layout::Permuted : Layout::Padded);
      x.fill_uniform(rng, -3.0, 3.0);
      w.fill_uniform(rng, -2.0, 2.0);
      OpParams p;
      p.eps = 1e-6f;
      run_checked(make_call(OpKind::RmsNorm, normed, {&x}, p), normed);
      run_checked(make_call(OpKind::Mul, want, {&normed, &w}), want);
      run_checked(make_call(OpKind::RmsNormMul, got, {&x, &w}, p), got);
      const std::string where = std::string(layout_name(l)) + " x [" + std::to_string(c.x[0]) + ", " +
                                std::to_string(c.x[1]) + ", ...] w [" + std::to_string(c.w[0]) + ", " +
                                std::to_string(c.w[1]) + ", " + std::to_string(c.w[2]) + ", ...]";
      // RmsNorm's float scale of row (i1, i2, i3), computed as its kernel does.
      auto scale = [&](int64_t i1, int64_t i2, int64_t i3) {
        double sum = 0.0;
        for (int64_t i = 0; i < c.x[0]; ++i) {
          const auto v = static_cast<float>(x.get(i, i1, i2, i3));
          sum += static_cast<double>(v * v);
        }
        const auto mean = static_cast<float>(sum / static_cast<double>(c.x[0]));
        return 1.0f / std::sqrt(mean + p.eps);
      };
      int mismatches = 0;
      for (int64_t i3 = 0; i3 < c.x[3]; ++i3)
        for (int64_t i2 = 0; i2 < c.x[2]; ++i2)
          for (int64_t i1 = 0; i1 < c.x[1]; ++i1) {
            const float row_scale = scale(i1, i2, i3);
            for (int64_t i0 = 0; i0 < c.x[0]; ++i0) {
              if (bits_at(got, i0, i1, i2, i3) != bits_at(want, i0, i1, i2, i3) && ++mismatches <= 3)
                ADD_FAILURE() << where << ": (" << i0 << ", " << i1 << ", " << i2 << ", " << i3 << ") "
                              << got.get(i0, i1, i2, i3) << " != " << want.get(i0, i1, i2, i3);
              // The same value rounded once, x * scale * w in double, differs somewhere: the
              // comparison above tells two roundings from one.
              const auto one = static_cast<float>(x.get(i0, i1, i2, i3) * double(row_scale) *
                                                  w.get(i0 % c.w[0], i1 % c.w[1], i2 % c.w[2], i3 % c.w[3]));
              if (one != static_cast<float>(want.get(i0, i1, i2, i3))) ++differs_from_one_rounding;
            }
          }
      EXPECT_EQ(mismatches, 0) << where;

      // In place: dst is x itself.
      run_checked(make_call(OpKind::RmsNormMul, x, {&x, &w}, p), x);
      for (int64_t i3 = 0; i3 < c.x[3]; ++i3)
        for (int64_t i2 = 0; i2 < c.x[2]; ++i2)
          for (int64_t i1 = 0; i1 < c.x[1]; ++i1)
            for (int64_t i0 = 0; i0 < c.x[0]; ++i0)
              ASSERT_EQ(bits_at(x, i0, i1, i2, i3), bits_at(want, i0, i1, i2, i3)) << where << " in place";
    }
  }
  EXPECT_GT(differs_from_one_rounding, 0);
}

TEST(OpsNorm, RmsNormMulRejectsAWeightThatDoesNotRepeat) {
  HostTensor x(DType::F32, {33, 4, 1, 1}), w(DType::F32, {5, 1, 1, 1}), w_rows(DType::F32, {33, 3, 1, 1}),
      d(DType::F32, {33, 4, 1, 1});
  EXPECT_FALSE(kernel_supported(make_call(OpKind::RmsNormMul, d, {&x, &w})));
  EXPECT_FALSE(kernel_supported(make_call(OpKind::RmsNormMul, d, {&x, &w_rows})));
  EXPECT_FALSE(kernel_supported(make_call(OpKind::RmsNormMul, d, {&x})));
  OpParams negative;
  negative.eps = -1.0f;
  EXPECT_FALSE(kernel_supported(make_call(OpKind::RmsNormMul, d, {&x, &x}, negative)));
  EXPECT_TRUE(kernel_supported(make_call(OpKind::RmsNormMul, d, {&x, &x})));
}

struct SoftMaxCase {
  Shape4 x;
  Shape4 mask;  // ne[0] == 0: no mask
  DType mask_type;
  float scale, max_bias;
};

TEST(OpsSoftMax, MaskScaleAndAlibi) {
  const SoftMaxCase cases[] = {
      {{5, 3, 1, 1}, {0, 0, 0, 0}, DType::F32, 1.0f, 0.0f},
      {{33, 7, 4, 2}, {33, 9, 2, 1}, DType::F32, 0.37f, 0.0f},  // mask rows beyond n, heads broadcast
      {{33, 7, 4, 2}, {33, 7, 1, 2}, DType::F16, 0.125f, 0.0f},
      {{17, 5, 6, 1}, {17, 5, 1, 1}, DType::F16, 1.0f, 8.0f},  // ALiBi, 6 heads (not a power of 2)
      {{1000, 2, 1, 1}, {1000, 2, 1, 1}, DType::F32, 2.0f, 0.0f},
  };
  std::mt19937 rng(12);
  for (const SoftMaxCase& c : cases) {
    for (Layout l : {Layout::Contiguous, Layout::Permuted, Layout::Strided0}) {
      HostTensor x(DType::F32, c.x, l), d(DType::F32, c.x, Layout::Padded);
      x.fill_uniform(rng, -6, 6);
      const bool has_mask = c.mask[0] != 0;
      HostTensor m(c.mask_type, has_mask ? c.mask : Shape4{1, 1, 1, 1}, Layout::Padded);
      if (has_mask) {
        m.fill_uniform(rng, -3, 1);
        // A causal-looking pattern of -inf, leaving every row at least one visible key.
        for (int64_t i3 = 0; i3 < c.mask[3]; ++i3)
          for (int64_t i2 = 0; i2 < c.mask[2]; ++i2)
            for (int64_t i1 = 0; i1 < c.mask[1]; ++i1)
              for (int64_t i0 = i1 + 2; i0 < c.mask[0]; i0 += 2) m.set(i0, i1, i2, i3, -INFINITY);
      }
      OpParams p;
      p.scale = c.scale;
      p.max_bias = c.max_bias;
      std::vector<const HostTensor*> srcs{&x};
      if (has_mask) srcs.push_back(&m);
      run_checked(make_call(OpKind::SoftMax, d, srcs, p), d);
      const int64_t n_head = c.x[2];
      const int64_t n_head_log2 = int64_t{1} << static_cast<int>(std::floor(std::log2(double(n_head))));
      auto slope_of = [&](int64_t h) {
        if (c.max_bias <= 0) return 1.0;
        const double m0 = std::pow(2.0, -c.max_bias / double(n_head_log2));
        const double m1 = std::pow(2.0, -(c.max_bias / 2.0) / double(n_head_log2));
        return h < n_head_log2 ? std::pow(m0, double(h + 1))
                               : std::pow(m1, double(2 * (h - n_head_log2) + 1));
      };
      auto logit = [&](int64_t j, int64_t i1, int64_t i2, int64_t i3) {
        double w = x.get(j, i1, i2, i3) * double(c.scale);
        if (has_mask) w += slope_of(i2) * m.get(j, i1, i2 % c.mask[2], i3 % c.mask[3]);
        return w;
      };
      std::vector<std::pair<double, double>> stats;  // per row: max logit, sum of e^(w - max)
      for (int64_t i3 = 0; i3 < c.x[3]; ++i3)
        for (int64_t i2 = 0; i2 < c.x[2]; ++i2)
          for (int64_t i1 = 0; i1 < c.x[1]; ++i1) {
            double mx = -INFINITY, sum = 0;
            for (int64_t j = 0; j < c.x[0]; ++j) mx = std::max(mx, logit(j, i1, i2, i3));
            for (int64_t j = 0; j < c.x[0]; ++j) sum += std::exp(logit(j, i1, i2, i3) - mx);
            stats.emplace_back(mx, sum);
          }
      expect_near(
          d,
          [&](int64_t i0, int64_t i1, int64_t i2, int64_t i3) {
            const auto& [mx, sum] = stats[static_cast<size_t>((i3 * c.x[2] + i2) * c.x[1] + i1)];
            return std::exp(logit(i0, i1, i2, i3) - mx) / sum;
          },
          1e-6, 1e-5, std::string("soft_max ") + layout_name(l) + " n=" + std::to_string(c.x[0]));
    }
  }
}

TEST(OpsSoftMax, FullyMaskedRowIsZero) {
  HostTensor x(DType::F32, {6, 2, 1, 1}), m(DType::F32, {6, 2, 1, 1}), d(DType::F32, {6, 2, 1, 1});
  for (int64_t i = 0; i < 6; ++i) {
    x.set(i, 0, 0, 0, double(i));
    x.set(i, 1, 0, 0, double(i));
    m.set(i, 1, 0, 0, -INFINITY);
  }
  run_checked(make_call(OpKind::SoftMax, d, {&x, &m}), d);
  for (int64_t i = 0; i < 6; ++i) EXPECT_EQ(d.get(i, 1), 0.0);
  double sum = 0;
  for (int64_t i = 0; i < 6; ++i) sum += d.get(i, 0);
  EXPECT_NEAR(sum, 1.0, 1e-6);
}

struct RopeCase {
  int64_t head_dim, n_head, n_tokens;
  int32_t n_dims;
  RopeMode mode;
  float freq_base, freq_scale, ext_factor, attn_factor;
  bool freq_factors;
};

// Angle of pair i at position p in double: theta = p * base^(-2i/n_dims) / ff, with YaRN.
struct RopeRef {
  const RopeCase& c;
  std::vector<double> ff;
  double angle(int64_t pos, int64_t i0, double* mscale) const {
    const double theta_extrap = double(pos) *
                                std::pow(double(c.freq_base), -2.0 * double(i0 / 2) / c.n_dims) /
                                (ff.empty() ? 1.0 : ff[static_cast<size_t>(i0 / 2)]);
    const double theta_interp = c.freq_scale * theta_extrap;
    *mscale = c.attn_factor;
    if (c.ext_factor == 0.0f) return theta_interp;
    const int n_ctx_orig = 4096;
    auto corr_dim = [&](double n_rot) {
      return c.n_dims * std::log(n_ctx_orig / (n_rot * 2 * M_PI)) / (2 * std::log(double(c.freq_base)));
    };
    const double low = std::max(0.0, std::floor(corr_dim(32.0)));
    const double high = std::min(double(c.n_dims - 1), std::ceil(corr_dim(1.0)));
    const double y = (double(i0 / 2) - low) / std::max(0.001, high - low);
    const double ramp = (1 - std::min(1.0, std::max(0.0, y))) * c.ext_factor;
    *mscale *= 1.0 + 0.1 * std::log(1.0 / c.freq_scale);
    return theta_interp * (1 - ramp) + theta_extrap * ramp;
  }
};

TEST(OpsRope, NormalNeoxYarnAndFrequencyFactors) {
  const RopeCase cases[] = {
      {64, 3, 5, 64, RopeMode::Normal, 10000.0f, 1.0f, 0.0f, 1.0f, false},
      {64, 3, 5, 64, RopeMode::Neox, 10000.0f, 1.0f, 0.0f, 1.0f, false},
      {10, 2, 7, 6, RopeMode::Normal, 10000.0f, 1.0f, 0.0f, 1.0f, false},  // partial rotation
      {10, 2, 7, 6, RopeMode::Neox, 10000.0f, 1.0f, 0.0f, 1.0f, false},
      {128, 2, 4, 128, RopeMode::Neox, 500000.0f, 1.0f, 0.0f, 1.0f, true},   // Llama 3.1 style factors
      {64, 2, 6, 64, RopeMode::Normal, 10000.0f, 0.25f, 1.0f, 0.8f, false},  // YaRN
      {64, 2, 6, 48, RopeMode::Neox, 1000000.0f, 0.5f, 1.0f, 1.0f, true},
  };
  std::mt19937 rng(13);
  for (const RopeCase& c : cases) {
    for (Layout l : {Layout::Contiguous, Layout::Padded, Layout::Permuted, Layout::Strided0}) {
      const Shape4 ne{c.head_dim, c.n_head, c.n_tokens, 1};
      HostTensor x(DType::F32, ne, l), d(DType::F32, ne, Layout::Padded);
      HostTensor pos(DType::I32, {c.n_tokens, 1, 1, 1}), ff(DType::F32, {c.n_dims / 2, 1, 1, 1});
      x.fill_uniform(rng, -1, 1);
      const int32_t positions[] = {0, 1, 17, 255, 1000, 2047, 3};
      for (int64_t t = 0; t < c.n_tokens; ++t) pos.set(t, 0, 0, 0, positions[t % 7]);
      RopeRef ref{c, {}};
      if (c.freq_factors) {
        ff.fill_uniform(rng, 1.0, 8.0);
        for (int64_t i = 0; i < c.n_dims / 2; ++i) ref.ff.push_back(ff.get(i));
      }
      OpParams p;
      p.rope = RopeParams{.n_dims = c.n_dims,
                          .mode = c.mode,
                          .n_ctx_orig = 4096,
                          .freq_base = c.freq_base,
                          .freq_scale = c.freq_scale,
                          .ext_factor = c.ext_factor,
                          .attn_factor = c.attn_factor,
                          .beta_fast = 32.0f,
                          .beta_slow = 1.0f};
      std::vector<const HostTensor*> srcs{&x, &pos};
      if (c.freq_factors) srcs.push_back(&ff);
      run_checked(make_call(OpKind::Rope, d, srcs, p), d);
      const bool neox = c.mode == RopeMode::Neox;
      // ggml builds each angle by repeated float multiplication: the angle's relative error grows
      // by about 2^-24 per pair, so the tolerance scales with |angle| * pair index.
      for (int64_t t = 0; t < c.n_tokens; ++t) {
        for (int64_t h = 0; h < c.n_head; ++h) {
          for (int64_t i0 = 0; i0 < c.head_dim; ++i0) {
            double want;
            double tol = 2e-6;
            if (i0 >= c.n_dims) {
              want = x.get(i0, h, t);
              tol = 0;
            } else {
              const int64_t half = c.n_dims / 2;
              // the pair (a, b) this dimension belongs to and its angle index (2 * pair)
              const int64_t pair = neox ? i0 % half : i0 / 2;
              const int64_t ia = neox ? pair : 2 * pair;
              const int64_t ib = neox ? pair + half : 2 * pair + 1;
              double mscale;
              const double th = ref.angle(static_cast<int64_t>(pos.get(t)), 2 * pair, &mscale);
              const double a = x.get(ia, h, t), b = x.get(ib, h, t);
              want = i0 == ia ? (a * std::cos(th) - b * std::sin(th)) * mscale
                              : (a * std::sin(th) + b * std::cos(th)) * mscale;
              tol += std::fabs(th) * double(pair + 2) * 1.2e-7 * (std::fabs(a) + std::fabs(b)) * mscale;
            }
            const double got = d.get(i0, h, t);
            ASSERT_LE(std::fabs(got - want), tol)
                << "rope " << layout_name(l) << " dims " << c.n_dims << (neox ? " neox" : " normal")
                << " at [" << i0 << ", " << h << ", " << t << "] pos " << pos.get(t);
          }
        }
      }
    }
  }
}

TEST(OpsRope, AnglesFollowGgmlsFloatRecurrence) {
  // theta for pair i is p * theta_scale^i built by i float multiplications (not powf per pair):
  // at a large position the float recurrence and the exact angle differ visibly, and the kernel
  // must land on the recurrence.
  const int64_t dims = 128;
  HostTensor x(DType::F32, {dims, 1, 1, 1}), d(DType::F32, {dims, 1, 1, 1}), pos(DType::I32, {1, 1, 1, 1});
  for (int64_t i = 0; i < dims; i += 2) x.set(i, 0, 0, 0, 1.0);  // (1, 0) pairs: output (cos, sin)
  pos.set(0, 0, 0, 0, 30011);
  OpParams p;
  p.rope.n_dims = static_cast<int32_t>(dims);
  p.rope.freq_base = 10000.0f;
  run_checked(make_call(OpKind::Rope, d, {&x, &pos}, p), d);
  const float theta_scale = std::pow(10000.0f, -2.0f / float(dims));
  float theta = 30011.0f;
  for (int64_t i0 = 0; i0 < dims; i0 += 2) {
    EXPECT_EQ(static_cast<float>(d.get(i0)), std::cos(theta)) << "pair " << i0 / 2;
    EXPECT_EQ(static_cast<float>(d.get(i0 + 1)), std::sin(theta)) << "pair " << i0 / 2;
    theta *= theta_scale;
  }
}

TEST(OpsRope, RejectsBadParams) {
  HostTensor x(DType::F32, {8, 2, 3, 1}), d(DType::F32, {8, 2, 3, 1}), pos(DType::I32, {3, 1, 1, 1});
  HostTensor short_pos(DType::I32, {2, 1, 1, 1});
  OpParams p;
  p.rope.n_dims = 8;
  EXPECT_TRUE(kernel_supported(make_call(OpKind::Rope, d, {&x, &pos}, p)));
  EXPECT_FALSE(kernel_supported(make_call(OpKind::Rope, d, {&x, &short_pos}, p)));
  p.rope.n_dims = 10;  // more than the head size
  EXPECT_FALSE(kernel_supported(make_call(OpKind::Rope, d, {&x, &pos}, p)));
  p.rope.n_dims = 7;  // odd
  EXPECT_FALSE(kernel_supported(make_call(OpKind::Rope, d, {&x, &pos}, p)));
  p.rope.n_dims = 8;
  p.rope.mode = static_cast<RopeMode>(1);
  EXPECT_FALSE(kernel_supported(make_call(OpKind::Rope, d, {&x, &pos}, p)));
}

}  // namespace
}  // namespace kiln::test
