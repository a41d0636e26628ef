// The audio encoder's kernels (issue 36): gelu_erf and im2col_1d, against scalar references over
// awkward layouts, and their refusals.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>

#include "op_harness.h"

namespace kiln::test {
namespace {

constexpr Layout kLayouts[] = {Layout::Contiguous, Layout::Padded, Layout::Permuted, Layout::Strided0};

TEST(OpsGeluErf, ExactGeluInFloat) {
  // ggml_vec_gelu_erf_f32: 0.5 x (1 + erf(x / sqrt 2)) in float, no table (so no F16 rounding:
  // the double-precision GELU agrees within float rounding everywhere).
  std::mt19937 rng(41);
  for (Layout l : kLayouts) {
    HostTensor x(DType::F32, {37, 3, 2, 1}, l), d(DType::F32, {37, 3, 2, 1}, Layout::Padded);
    x.fill_uniform(rng, -12, 12);
    run_checked(make_call(OpKind::GeluErf, d, {&x}), d);
    expect_near(
        d,
        [&](int64_t a, int64_t b, int64_t c, int64_t e) {
          const double v = x.get(a, b, c, e);
          return 0.5 * v * (1.0 + std::erf(v / std::sqrt(2.0)));
        },
        1e-6, 1e-6, std::string("gelu_erf ") + layout_name(l));
  }
  // Not the tanh approximation: at x = -3 the two differ by ~3e-4 (erf: -0.0040497, tanh: -0.0036374).
  HostTensor x(DType::F32, {1, 1, 1, 1}), d(DType::F32, {1, 1, 1, 1});
  x.set(0, 0, 0, 0, -3.0);
  run_checked(make_call(OpKind::GeluErf, d, {&x}), d);
  EXPECT_NEAR(d.get(0), -0.0040496597, 1e-7);
}

TEST(OpsIm2Col1d, ColumnsOfEveryWindowAsF16) {
  std::mt19937 rng(42);
  struct Case {
    int64_t len, channels, batch;
    Conv1dParams conv;
  };
  const Case cases[] = {
      {50, 3, 1, {.kernel = 3, .stride = 1, .padding = 1, .dilation = 1}},  // Whisper's first stem
      {50, 4, 2, {.kernel = 3, .stride = 2, .padding = 1, .dilation = 1}},  // the second, stride 2
      {17, 2, 1, {.kernel = 5, .stride = 3, .padding = 0, .dilation = 2}},
      {1, 1, 1, {.kernel = 1, .stride = 1, .padding = 0, .dilation = 1}},
  };
  for (const Case& c : cases) {
    const int64_t out_len = c.conv.out_len(c.len), k = c.conv.kernel;
    for (Layout l : kLayouts) {
      HostTensor x(DType::F32, {c.len, c.channels, c.batch, 1}, l);
      HostTensor d(DType::F16, {c.channels * k, out_len, c.batch, 1}, Layout::Padded);
      x.fill_uniform(rng, -70000, 70000);  // beyond F16's range too: infinities as ggml's rounding gives
      OpParams p;
      p.conv = c.conv;
      run_checked(make_call(OpKind::Im2Col1d, d, {&x}, p), d);
      int bad = 0;
      for (int64_t n = 0; n < c.batch; ++n) {
        for (int64_t o = 0; o < out_len; ++o) {
          for (int64_t ch = 0; ch < c.channels; ++ch) {
            for (int64_t j = 0; j < k; ++j) {
              const int64_t i = o * c.conv.stride + j * c.conv.dilation - c.conv.padding;
              const float want = i >= 0 && i < c.len ? round_f16(static_cast<float>(x.get(i, ch, n))) : 0.0f;
              const double got = d.get(ch * k + j, o, n);
              if (!(got == static_cast<double>(want)) && bad++ < 5) {
                ADD_FAILURE() << layout_name(l) << " len " << c.len << ": dst[" << ch * k + j << ", " << o << ", "
                              << n << "] = " << got << ", want " << want;
              }
            }
          }
        }
      }
    }
  }
}

TEST(OpsIm2Col1d, RefusesWindowsThatDoNotFitAndWrongShapes) {
  OpParams p;
  p.conv = {.kernel = 5, .stride = 1, .padding = 0, .dilation = 1};
  HostTensor x(DType::F32, {4, 2, 1, 1}), d(DType::F16, {10, 1, 1, 1});
  Status st = check_kernel(make_call(OpKind::Im2Col1d, d, {&x}, p));
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.error().message.find("does not fit"), std::string::npos) << st.error().message;
  p.conv = {.kernel = 3, .stride = 1, .padding = 1, .dilation = 1};
  HostTensor wrong(DType::F16, {6, 3, 1, 1});  // out_len is 4
  st = check_kernel(make_call(OpKind::Im2Col1d, wrong, {&x}, p));
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.error().message.find("[im2col_1d] dst"), std::string::npos) << st.error().message;
  HostTensor f32_dst(DType::F32, {6, 4, 1, 1});
  EXPECT_FALSE(kernel_supported(make_call(OpKind::Im2Col1d, f32_dst, {&x}, p)));
  p.conv.stride = 0;
  HostTensor ok_dst(DType::F16, {6, 4, 1, 1});
  EXPECT_FALSE(kernel_supported(make_call(OpKind::Im2Col1d, ok_dst, {&x}, p)));
}

}  // namespace
}  // namespace kiln::test
