// Element-wise kernels (add, mul, scale, silu, gelu, gelu_quick, swiglu), concat, argmax, avg_pool_2d
// and the dispatcher's
// validation, against double-precision references over awkward shapes and layouts.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "core/half.h"
#include "op_harness.h"
#include "ops/activations.h"
#include "ops/quant/f16_lookup.h"
#include "ops/quant/silu_rows.h"
#include "ops/quant/simd_math.h"

namespace kiln::test {
namespace {

constexpr Layout kLayouts[] = {Layout::Contiguous, Layout::Padded, Layout::Permuted, Layout::Strided0};

struct BinaryCase {
  Shape4 a, b;
};

TEST(OpsElementwise, AddAndMulBroadcastLikeGgml) {
  const BinaryCase cases[] = {
      {{7, 5, 3, 2}, {7, 5, 3, 2}},    // same shape, odd sizes
      {{33, 4, 3, 1}, {33, 1, 1, 1}},  // one row over every row
      {{10, 6, 4, 2}, {5, 3, 2, 1}},   // repeats along every dimension, dim 0 too
      {{1, 1, 1, 1}, {1, 1, 1, 1}},   {{129, 3, 1, 1}, {1, 3, 1, 1}},  // one value per row
  };
  std::mt19937 rng(1);
  for (const BinaryCase& c : cases) {
    for (Layout la : kLayouts) {
      for (OpKind kind : {OpKind::Add, OpKind::Mul}) {
        const Layout lb = la == Layout::Permuted ? Layout::Strided0 : Layout::Padded;
        const Layout ld = la == Layout::Contiguous ? Layout::Permuted : Layout::Contiguous;
        HostTensor a(DType::F32, c.a, la), b(DType::F32, c.b, lb), d(DType::F32, c.a, ld);
        a.fill_uniform(rng, -2, 2);
        b.fill_uniform(rng, -2, 2);
        run_checked(make_call(kind, d, {&a, &b}), d);
        // A float sum or product of two floats is the double result rounded once: exact match.
        expect_near(
            d,
            [&](int64_t i0, int64_t i1, int64_t i2, int64_t i3) {
              const double x = a.get(i0, i1, i2, i3);
              const double y = b.get(i0 % c.b[0], i1 % c.b[1], i2 % c.b[2], i3 % c.b[3]);
              return static_cast<double>(static_cast<float>(kind == OpKind::Add ? x + y : x * y));
            },
            0, 0, std::string(op_name(kind)) + " " + layout_name(la));
      }
    }
  }
}

TEST(OpsElementwise, InPlaceAddOverwritesSrc0) {
  std::mt19937 rng(2);
  HostTensor a(DType::F32, {17, 3, 2, 1}, Layout::Padded), b(DType::F32, {17, 1, 1, 1});
  a.fill_uniform(rng, -1, 1);
  b.fill_uniform(rng, -1, 1);
  std::vector<double> before;
  for (int64_t i2 = 0; i2 < 2; ++i2)
    for (int64_t i1 = 0; i1 < 3; ++i1)
      for (int64_t i0 = 0; i0 < 17; ++i0) before.push_back(a.get(i0, i1, i2));
  run_checked(make_call(OpKind::Add, a, {&a, &b}), a);
  expect_near(
      a,
      [&](int64_t i0, int64_t i1, int64_t i2, int64_t) {
        return static_cast<double>(static_cast<float>(before[(i2 * 3 + i1) * 17 + i0] + b.get(i0)));
      },
      0, 0, "in-place add");
}

// The row functions (AVX2 where the CPU has it) against the element-by-element definition, bit
// for bit, where ggml's arithmetic takes its special paths: e^-x past the float range (x beyond
// +-88 and +-104), results in the subnormals, infinities, NaN, signed zeros.
TEST(OpsElementwise, SiluRowsFollowGgmlsArithmeticAtTheExtremes) {
  std::vector<float> x = {0.0f,
                          -0.0f,
                          1.0f,
                          -1.0f,
                          87.0f,
                          -87.0f,
                          88.5f,
                          -88.5f,
                          89.0f,
                          -89.0f,
                          103.0f,
                          -103.0f,
                          104.5f,
                          -104.5f,
                          130.0f,
                          -130.0f,
                          200.0f,
                          -200.0f,
                          1e-40f,
                          -1e-40f,
                          1e30f,
                          -1e30f,
                          std::numeric_limits<float>::infinity(),
                          -std::numeric_limits<float>::infinity(),
                          std::numeric_limits<float>::quiet_NaN()};
  for (float v = -120.0f; v <= 120.0f; v += 0.37f) x.push_back(v);
  const auto n = static_cast<int64_t>(x.size());
  std::vector<float> g(x.size()), y(x.size()), z(x.size());
  for (size_t i = 0; i < g.size(); ++i) g[i] = 0.25f + static_cast<float>(i % 7);
  quant::silu_row_ggml(n, y.data(), x.data());
  quant::swiglu_row_ggml(n, z.data(), x.data(), g.data());
  auto same = [](float a, float b) {
    return std::memcmp(&a, &b, sizeof a) == 0 || (std::isnan(a) && std::isnan(b));
  };
  for (int64_t i = 0; i < n; ++i) {
    const float want = quant::silu_vectorised(i, n) ? quant::silu_ggml_avx512(x[i]) : ops::silu_f32(x[i]);
    EXPECT_TRUE(same(y[i], want)) << "silu(" << x[i] << ") at " << i << ": " << y[i] << " vs " << want;
    EXPECT_TRUE(same(z[i], want * g[i])) << "swiglu(" << x[i] << ") at " << i;
  }
}

TEST(OpsElementwise, ScaleSiluGeluSwiGlu) {
  std::mt19937 rng(3);
  const Shape4 shapes[] = {{1, 1, 1, 1}, {31, 3, 2, 1}, {64, 2, 1, 3}, {4097, 1, 1, 1}};
  for (const Shape4& ne : shapes) {
    for (Layout l : kLayouts) {
      HostTensor x(DType::F32, ne, l), g(DType::F32, ne, Layout::Padded), d(DType::F32, ne, Layout::Permuted);
      x.fill_uniform(rng, -12, 12);  // past gelu's +-10 clamps
      g.fill_uniform(rng, -3, 3);
      const std::string where = std::string(" ") + layout_name(l) + " ne0=" + std::to_string(ne[0]);

      OpParams p;
      p.scale = -0.3721f;
      run_checked(make_call(OpKind::Scale, d, {&x}, p), d);
      expect_near(
          d,
          [&](int64_t a, int64_t b, int64_t c, int64_t e) {
            return double(float(x.get(a, b, c, e) * double(p.scale)));
          },
          0, 0, "scale" + where);

      // SiLU bit for bit as ggml's AVX-512 build: its vector arithmetic for the first
      // ne0 - ne0 % 16 values of a row, libm's for the rest; and within 1e-6 of the exact value.
      auto silu_ggml = [&](int64_t a, int64_t b, int64_t c, int64_t e) {
        const float v = x.get(a, b, c, e);
        return quant::silu_vectorised(a, ne[0]) ? quant::silu_ggml_avx512(v) : ops::silu_f32(v);
      };
      run_checked(make_call(OpKind::Silu, d, {&x}), d);
      expect_near(
          d, [&](int64_t a, int64_t b, int64_t c, int64_t e) { return double(silu_ggml(a, b, c, e)); }, 0, 0,
          "silu" + where);
      expect_near(
          d,
          [&](int64_t a, int64_t b, int64_t c, int64_t e) {
            const double v = x.get(a, b, c, e);
            return v / (1.0 + std::exp(-v));
          },
          1e-6, 1e-6, "silu" + where);

      run_checked(make_call(OpKind::SwiGlu, d, {&x, &g}), d);
      expect_near(
          d,
          [&](int64_t a, int64_t b, int64_t c, int64_t e) {
            return double(silu_ggml(a, b, c, e) * static_cast<float>(g.get(a, b, c, e)));
          },
          0, 0, "swiglu" + where);

      // GELU (tanh form) through ggml's F16 table: the input is rounded to F16 (relative 2^-11,
      // and gelu' <= 1.13) and so is the output; beyond +-10 the clamps are exact.
      run_checked(make_call(OpKind::Gelu, d, {&x}), d);
      expect_near(
          d,
          [&](int64_t a, int64_t b, int64_t c, int64_t e) {
            const double v = x.get(a, b, c, e);
            if (v <= -10) return 0.0;
            if (v >= 10) return v;
            return 0.5 * v * (1 + std::tanh(std::sqrt(2 / M_PI) * v * (1 + 0.044715 * v * v)));
          },
          2e-5, 2e-3, "gelu" + where);
      for (int64_t i0 = 0; i0 < ne[0]; ++i0) {
        const float got = static_cast<float>(d.get(i0));
        if (std::fabs(x.get(i0)) < 10) {
          EXPECT_EQ(got, round_f16(got)) << "gelu output is not an F16 table value";
        }
      }
      // Bit for bit the element rule (the row kernels look up eight values at a time).
      expect_near(
          d,
          [&](int64_t a, int64_t b, int64_t c, int64_t e) {
            return double(ops::gelu_f32(x.get(a, b, c, e)));
          },
          0, 0, "gelu bits" + where);
      run_checked(make_call(OpKind::GeluQuick, d, {&x}), d);
      expect_near(
          d,
          [&](int64_t a, int64_t b, int64_t c, int64_t e) {
            return double(ops::gelu_quick_f32(x.get(a, b, c, e)));
          },
          0, 0, "gelu_quick bits" + where);
    }
  }
}

// The F16 table lookup behind GELU against its element form, over values that round to F16
// subnormals, overflow to infinity, tie, and NaN: a table that maps every F16 value to itself gives
// each value's F16 rounding.
TEST(OpsElementwise, F16LookupRoundsAsTheElementForm) {
  std::vector<uint16_t> identity(1 << 16);
  for (size_t i = 0; i < identity.size(); ++i) identity[i] = static_cast<uint16_t>(i);
  std::vector<float> x = {
      0.0f,   -0.0f,         1e-8f,        -3e-6f, 65504.0f,           65520.0f,           1e6f,
      -1e6f,  INFINITY,      -INFINITY,    NAN,    1.0f + 1.0f / 2048, 1.0f + 3.0f / 2048, 0.1f,
      -2.75f, 5.9604645e-8f, 2.9802322e-8f};
  std::mt19937 rng(9);
  std::uniform_real_distribution<float> dist(-70000.0f, 70000.0f);
  while (x.size() < 61) x.push_back(dist(rng));
  std::vector<float> y(x.size());
  quant::f16_lookup_row(static_cast<int64_t>(x.size()), y.data(), x.data(), identity.data());
  for (size_t i = 0; i < x.size(); ++i) {
    const float want = f16_to_f32(f32_to_f16(x[i]));
    if (std::isnan(want)) {
      EXPECT_TRUE(std::isnan(y[i])) << i;
    } else {
      EXPECT_EQ(std::bit_cast<uint32_t>(y[i]), std::bit_cast<uint32_t>(want)) << "x " << x[i];
    }
  }
}

TEST(OpsElementwise, GeluTableValuesAtF16Points) {
  // At inputs that are F16 values the table holds gelu(x) rounded to F16, computed in float.
  const float xs[] = {-9.5f, -3.0f, -1.0f, -0.5f, -0.0f, 0.0f, 0.125f, 0.5f, 1.0f, 2.5f, 9.5f};
  HostTensor x(DType::F32, {std::size(xs), 1, 1, 1}), d(DType::F32, {std::size(xs), 1, 1, 1});
  for (size_t i = 0; i < std::size(xs); ++i) x.set(static_cast<int64_t>(i), 0, 0, 0, xs[i]);
  run_checked(make_call(OpKind::Gelu, d, {&x}), d);
  for (size_t i = 0; i < std::size(xs); ++i) {
    const double v = xs[i];
    const double want = 0.5 * v * (1 + std::tanh(std::sqrt(2 / M_PI) * v * (1 + 0.044715 * v * v)));
    EXPECT_NEAR(d.get(static_cast<int64_t>(i)), want, std::fabs(want) * 1.0e-3 + 1e-7) << "x = " << v;
  }
}

TEST(OpsElementwise, GeluQuickThroughTheF16Table) {
  // ggml's F16 table: x rounded to F16, x * sigmoid(1.702 x) in float, the result rounded to F16;
  // no clamping, so large inputs come back as their F16 rounding.
  std::mt19937 rng(31);
  for (Layout l : kLayouts) {
    HostTensor x(DType::F32, {45, 3, 2, 1}, l), d(DType::F32, {45, 3, 2, 1}, Layout::Padded);
    x.fill_uniform(rng, -20, 20);
    run_checked(make_call(OpKind::GeluQuick, d, {&x}), d);
    expect_near(
        d,
        [&](int64_t a, int64_t b, int64_t c, int64_t e) {
          const float h = round_f16(static_cast<float>(x.get(a, b, c, e)));
          return static_cast<double>(round_f16(h * (1.0f / (1.0f + std::exp(-1.702f * h)))));
        },
        0, 0, std::string("gelu_quick ") + layout_name(l));
  }
}

TEST(OpsAvgPool2d, MeanOfEachWindowInGgmlOrder) {
  // src [c, w, h, b]: windows of k x k grid cells per channel; the float sum runs rows (y) outer,
  // columns (x) inner, from 0, then is divided by k * k: the reference repeats that order.
  std::mt19937 rng(32);
  struct Case {
    Shape4 ne;
    int k;
  };
  for (const Case& c :
       {Case{{7, 8, 8, 1}, 4}, Case{{3, 6, 4, 2}, 2}, Case{{5, 3, 3, 1}, 3}, Case{{2, 5, 5, 1}, 1}}) {
    for (Layout l : kLayouts) {
      HostTensor x(DType::F32, c.ne, l);
      HostTensor d(DType::F32, {c.ne[0], c.ne[1] / c.k, c.ne[2] / c.k, c.ne[3]}, Layout::Padded);
      x.fill_uniform(rng, -3, 3);
      OpParams p;
      p.pool = c.k;
      run_checked(make_call(OpKind::AvgPool2d, d, {&x}, p), d);
      expect_near(
          d,
          [&](int64_t ch, int64_t ox, int64_t oy, int64_t b) {
            float sum = 0.0f;
            for (int ky = 0; ky < c.k; ++ky)
              for (int kx = 0; kx < c.k; ++kx)
                sum += static_cast<float>(x.get(ch, ox * c.k + kx, oy * c.k + ky, b));
            return static_cast<double>(sum / static_cast<float>(c.k * c.k));
          },
          0, 0, "avg_pool_2d k=" + std::to_string(c.k) + " " + layout_name(l));
    }
  }
  // A window that does not tile the grid is refused with the numbers.
  HostTensor x(DType::F32, {4, 6, 6, 1}), d(DType::F32, {4, 1, 1, 1});
  OpParams p;
  p.pool = 4;
  const Status st = check_kernel(make_call(OpKind::AvgPool2d, d, {&x}, p));
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.error().message.find("6 x 6"), std::string::npos) << st.error().message;
}

// Mixed types and layouts take the kernel's per-value path; F32 throughout with contiguous rows
// its whole-row copies (every axis but 0).
TEST(OpsConcat, EveryAxisAndMixedFloatTypes) {
  std::mt19937 rng(4);
  for (const bool all_f32 : {false, true}) {
    for (int axis = 0; axis < 4; ++axis) {
      Shape4 na{5, 3, 2, 2}, nb{5, 3, 2, 2}, nd{5, 3, 2, 2};
      nb[axis] = 3;
      nd[axis] = na[axis] + nb[axis];
      HostTensor a(DType::F32, na, all_f32 ? Layout::Padded : Layout::Permuted),
          b(all_f32 ? DType::F32 : DType::F16, nb, Layout::Padded),
          d(DType::F32, nd, all_f32 ? Layout::Padded : Layout::Strided0);
      a.fill_uniform(rng, -1, 1);
      b.fill_uniform(rng, -1, 1);
      OpParams p;
      p.axis = axis;
      run_checked(make_call(OpKind::Concat, d, {&a, &b}, p), d);
      expect_near(
          d,
          [&](int64_t i0, int64_t i1, int64_t i2, int64_t i3) {
            int64_t idx[4] = {i0, i1, i2, i3};
            if (idx[axis] < na[axis]) return a.get(idx[0], idx[1], idx[2], idx[3]);
            idx[axis] -= na[axis];
            return b.get(idx[0], idx[1], idx[2], idx[3]);
          },
          0, 0, std::string(all_f32 ? "f32 " : "mixed ") + "concat axis " + std::to_string(axis));
    }
  }
}

TEST(OpsArgMax, FirstIndexOfTheMaximum) {
  std::mt19937 rng(5);
  HostTensor x(DType::F32, {37, 4, 3, 1}, Layout::Padded), d(DType::I32, {12, 1, 1, 1});
  x.fill_uniform(rng, -5, 5);
  x.set(7, 1, 0, 0, 100.0);  // a tie: the first index wins
  x.set(30, 1, 0, 0, 100.0);
  for (int64_t i0 = 0; i0 < 37; ++i0) x.set(i0, 2, 2, 0, -INFINITY);  // all -inf: index 0
  run_checked(make_call(OpKind::ArgMax, d, {&x}), d);
  for (int64_t r = 0; r < 12; ++r) {
    const int64_t i1 = r % 4, i2 = r / 4;
    int64_t best = 0;
    for (int64_t i0 = 1; i0 < 37; ++i0) {
      if (x.get(i0, i1, i2) > x.get(best, i1, i2)) best = i0;
    }
    EXPECT_EQ(d.get(r), best) << "row " << r;
  }
}

TEST(OpsDispatch, RejectsBadCallsWithAMessage) {
  HostTensor a(DType::F32, {8, 2, 1, 1}), b(DType::F32, {3, 1, 1, 1}), d(DType::F32, {8, 2, 1, 1});
  // src1 does not repeat over src0 (8 % 3 != 0).
  Status st = check_kernel(make_call(OpKind::Add, d, {&a, &b}));
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.error().message.find("[add]"), std::string::npos) << st.error().message;
  EXPECT_NE(st.error().message.find("[3, 1, 1, 1]"), std::string::npos) << st.error().message;
  // Wrong arity, wrong dst type, non-positive sizes, unknown op kind.
  EXPECT_FALSE(kernel_supported(make_call(OpKind::Add, d, {&a})));
  HostTensor di(DType::I32, {8, 2, 1, 1});
  EXPECT_FALSE(kernel_supported(make_call(OpKind::Silu, di, {&a})));
  OpCall bad = make_call(OpKind::Silu, d, {&a});
  bad.dst.ne[1] = 0;
  EXPECT_FALSE(kernel_supported(bad));
  bad = make_call(OpKind::Silu, d, {&a});
  bad.kind = static_cast<OpKind>(200);
  st = check_kernel(bad);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.error().message.find("unknown op kind"), std::string::npos);
  bad = make_call(OpKind::Silu, d, {&a});
  bad.n_src = 5;
  EXPECT_FALSE(kernel_supported(bad));
  bad = make_call(OpKind::Silu, d, {&a});
  bad.src[0].type = static_cast<DType>(4);  // a retired type id
  EXPECT_FALSE(kernel_supported(bad));
  HostTensor q(DType::Q4_0, {64, 2, 1, 1}), f(DType::F32, {64, 2, 1, 1});
  bad = make_call(OpKind::Cpy, f, {&q});
  EXPECT_TRUE(kernel_supported(bad));
  bad.src[0].nb[0] = 2;  // blocks overlapping: a malformed quantized view
  EXPECT_FALSE(kernel_supported(bad));
}

}  // namespace
}  // namespace kiln::test
