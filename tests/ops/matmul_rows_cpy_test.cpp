// MulMat over every weight type (activations converted as llama.cpp converts them), GetRows over
// every type, Cpy between float types and into quantized KV-cache formats, and SetRows (a batch's
// K/V rows into the cells a cache chose).
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "core/half.h"
#include "op_harness.h"
#include "ops/quant/quant.h"

namespace kiln::test {
namespace {

const DType kWeightTypes[] = {DType::F32,  DType::F16,  DType::BF16, DType::Q4_0,  DType::Q4_1,
                              DType::Q5_0, DType::Q5_1, DType::Q8_0, DType::Q2_K,  DType::Q3_K,
                              DType::Q4_K, DType::Q5_K, DType::Q6_K, DType::IQ4_NL, DType::IQ4_XS};

std::string type_str(DType t) { return std::string(dtype_name(t)); }

// Decodes one row of an activation format (the vec_dot_type) to doubles, from the block layouts
// of ggml-common.h, independently of src/ops/quant.
std::vector<double> decode_activation(DType t, const uint8_t* p, int64_t n) {
  std::vector<double> out(static_cast<size_t>(n));
  auto f16 = [](const uint8_t* q) {
    _Float16 h;
    std::memcpy(&h, q, 2);
    return static_cast<double>(h);
  };
  switch (t) {
    case DType::F32:
      for (int64_t i = 0; i < n; ++i) {
        float f;
        std::memcpy(&f, p + 4 * i, 4);
        out[i] = f;
      }
      break;
    case DType::F16:
      for (int64_t i = 0; i < n; ++i) out[i] = f16(p + 2 * i);
      break;
    case DType::BF16:
      for (int64_t i = 0; i < n; ++i) {
        const uint32_t u = static_cast<uint32_t>(p[2 * i] | (p[2 * i + 1] << 8)) << 16;
        float f;
        std::memcpy(&f, &u, 4);
        out[i] = f;
      }
      break;
    case DType::Q8_0:  // {f16 d; int8 qs[32]}
    case DType::Q8_1:  // {f16 d; f16 s; int8 qs[32]}
      for (int64_t b = 0; b < n / 32; ++b) {
        const uint8_t* blk = p + b * static_cast<int64_t>(type_size(t));
        const double d = f16(blk);
        const int8_t* qs = reinterpret_cast<const int8_t*>(blk + (t == DType::Q8_0 ? 2 : 4));
        for (int i = 0; i < 32; ++i) out[b * 32 + i] = d * qs[i];
      }
      break;
    case DType::Q8_K:  // {float d; int8 qs[256]; int16 bsums[16]}
      for (int64_t b = 0; b < n / 256; ++b) {
        const uint8_t* blk = p + b * static_cast<int64_t>(type_size(t));
        float d;
        std::memcpy(&d, blk, 4);
        const int8_t* qs = reinterpret_cast<const int8_t*>(blk + 4);
        for (int i = 0; i < 256; ++i) out[b * 256 + i] = double(d) * qs[i];
      }
      break;
    default:
      ADD_FAILURE() << "no decoder for " << dtype_name(t);
  }
  return out;
}

struct MatCase {
  int64_t k, n, m;
  int64_t w2, w3, a2, a3;  // weight / activation planes (broadcast a2 % w2 == 0)
};

TEST(OpsMulMat, EveryWeightTypeMatchesItsConvertedActivationDot) {
  std::mt19937 rng(20);
  // 2-D weights with a multiple of 8 rows (n = 24) take the repacked-order dot of Q4_0, IQ4_NL
  // and Q4_K (quant.h vec_dot_rows8); the others vec_dot.
  for (DType wt : kWeightTypes) {
    const int64_t bs = block_size(wt) == 1 ? 1 : block_size(wt);
    const bool k_quant = bs == 256;
    std::vector<MatCase> cases;
    if (k_quant) {
      cases = {{256, 17, 1, 1, 1, 1, 1}, {512, 5, 19, 2, 1, 4, 3}, {256, 24, 3, 1, 1, 1, 1}};
    } else if (bs == 32) {
      cases = {{96, 17, 1, 1, 1, 1, 1}, {64, 33, 19, 2, 1, 4, 3}, {96, 24, 3, 1, 1, 1, 1}};
    } else {
      cases = {{37, 17, 1, 1, 1, 1, 1}, {96, 5, 19, 2, 1, 4, 3}, {256, 3, 2, 1, 1, 1, 1}};
    }
    const QuantTraits* tr = quant_traits(wt);
    ASSERT_NE(tr, nullptr) << type_str(wt);
    for (const MatCase& c : cases) {
      for (Layout la : {Layout::Contiguous, Layout::Permuted}) {
        HostTensor w(wt, {c.k, c.n, c.w2, c.w3}, Layout::Padded);
        HostTensor a(DType::F32, {c.k, c.m, c.a2, c.a3}, la);
        HostTensor d(DType::F32, {c.n, c.m, c.a2, c.a3},
                     la == Layout::Contiguous ? Layout::Permuted : Layout::Padded);
        std::vector<float> wv(static_cast<size_t>(c.k * c.n * c.w2 * c.w3));
        std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
        for (float& v : wv) v = dist(rng);
        if (info(wt).quantized) {
          w.set_quantized(wv);
        } else {
          size_t idx = 0;
          for (int64_t i3 = 0; i3 < c.w3; ++i3)
            for (int64_t i2 = 0; i2 < c.w2; ++i2)
              for (int64_t i1 = 0; i1 < c.n; ++i1)
                for (int64_t i0 = 0; i0 < c.k; ++i0) w.set(i0, i1, i2, i3, wv[idx++]);
        }
        a.fill_uniform(rng, -1, 1);
        run_checked(make_call(OpKind::MulMat, d, {&w, &a}), d);

        // Reference: dequantized weights (bit-exact to_float, tested in tests/quant) times the
        // activations converted to vec_dot_type and decoded here, summed in double.
        const std::string where =
            type_str(wt) + " k=" + std::to_string(c.k) + " m=" + std::to_string(c.m) + " " + layout_name(la);
        std::vector<uint8_t> conv(row_size(tr->vec_dot_type, c.k));
        std::vector<float> wrow(static_cast<size_t>(c.k));
        std::vector<float> arow(static_cast<size_t>(c.k));
        double max_err = 0, max_ratio = 0;
        for (int64_t i3 = 0; i3 < c.a3; ++i3)
          for (int64_t i2 = 0; i2 < c.a2; ++i2)
            for (int64_t j = 0; j < c.m; ++j) {
              for (int64_t i = 0; i < c.k; ++i) arow[i] = static_cast<float>(a.get(i, j, i2, i3));
              tr->act_from_float(arow.data(), conv.data(), c.k);
              const std::vector<double> act = decode_activation(tr->vec_dot_type, conv.data(), c.k);
              for (int64_t i = 0; i < c.n; ++i) {
                tr->to_float(w.row(i, i2 / (c.a2 / c.w2), i3 / (c.a3 / c.w3)), wrow.data(), c.k);
                double want = 0, mag = 0, exact = 0, exact_mag = 0;
                for (int64_t q = 0; q < c.k; ++q) {
                  want += double(wrow[q]) * act[q];
                  mag += std::fabs(double(wrow[q]) * act[q]);
                  exact += double(wrow[q]) * arow[q];
                  exact_mag += std::fabs(double(wrow[q]) * arow[q]);
                }
                const double got = d.get(i, j, i2, i3);
                // Float accumulation in the dot products; Q8_1's per-block sum s is stored as F16
                // (ggml's layout), which the Q4_1/Q5_1 dots use for the min term.
                const double tol = (tr->vec_dot_type == DType::Q8_1 ? 2e-3 : 2e-6) * mag + 1e-6;
                max_err = std::max(max_err, std::fabs(got - want));
                ASSERT_LE(std::fabs(got - want), tol)
                    << where << " at [" << i << ", " << j << ", " << i2 << ", " << i3 << "] want " << want;
                // And the activation conversion costs at most what llama.cpp's does (Q8: 1/127
                // of each block's max, relative; F16: 2^-11; BF16: 2^-8).
                max_ratio = std::max(max_ratio, std::fabs(got - exact) / (exact_mag + 1e-9));
              }
            }
        EXPECT_LT(max_ratio, 1.2e-2) << where << ": activation conversion error too large";
      }
    }
  }
}

TEST(OpsMulMat, RejectsMismatchedShapes) {
  HostTensor w(DType::Q4_0, {64, 8, 1, 1}), a(DType::F32, {32, 3, 1, 1}), d(DType::F32, {8, 3, 1, 1});
  const Status st = check_kernel(make_call(OpKind::MulMat, d, {&w, &a}));
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.error().message.find("[mul_mat]"), std::string::npos);
  HostTensor a_ok(DType::F32, {64, 3, 1, 1}), a_strided(DType::F32, {64, 3, 1, 1}, Layout::Strided0);
  EXPECT_TRUE(kernel_supported(make_call(OpKind::MulMat, d, {&w, &a_ok})));
  EXPECT_FALSE(kernel_supported(make_call(OpKind::MulMat, d, {&w, &a_strided})));
  HostTensor w_bad(DType::Q8_K, {256, 8, 1, 1}), a256(DType::F32, {256, 3, 1, 1});  // activation-only type
  EXPECT_FALSE(kernel_supported(make_call(OpKind::MulMat, d, {&w_bad, &a256})));
}

TEST(OpsGetRows, EveryTypeAndOutOfRangeIds) {
  std::mt19937 rng(21);
  for (DType wt : kWeightTypes) {
    const int64_t k = block_size(wt) == 256 ? 256 : 64;
    HostTensor w(wt, {k, 7, 2, 1}, Layout::Padded);
    std::vector<float> wv(static_cast<size_t>(k * 7 * 2));
    std::uniform_real_distribution<float> dist(-2.0f, 2.0f);
    for (float& v : wv) v = dist(rng);
    if (info(wt).quantized) {
      w.set_quantized(wv);
    } else {
      size_t idx = 0;
      for (int64_t i2 = 0; i2 < 2; ++i2)
        for (int64_t i1 = 0; i1 < 7; ++i1)
          for (int64_t i0 = 0; i0 < k; ++i0) w.set(i0, i1, i2, 0, wv[idx++]);
    }
    HostTensor ids(DType::I32, {5, 2, 1, 1});
    const int32_t id_values[2][5] = {{3, 0, 6, 3, -1},
                                     {1, 7, 2, 2, 5}};  // repeats; -1 and 7 are out of range
    for (int64_t i1 = 0; i1 < 2; ++i1)
      for (int64_t i0 = 0; i0 < 5; ++i0) ids.set(i0, i1, 0, 0, id_values[i1][i0]);
    HostTensor d(DType::F32, {k, 5, 2, 1}, Layout::Padded);
    run_checked(make_call(OpKind::GetRows, d, {&w, &ids}), d);
    std::vector<float> row(static_cast<size_t>(k));
    for (int64_t i2 = 0; i2 < 2; ++i2) {
      for (int64_t r = 0; r < 5; ++r) {
        const int32_t id = id_values[i2][r];
        if (id < 0 || id >= 7) {
          for (int64_t i0 = 0; i0 < k; ++i0)
            EXPECT_TRUE(std::isnan(d.get(i0, r, i2))) << "bad id row must be NaN";
          continue;
        }
        if (info(wt).quantized) {
          quant_traits(wt)->to_float(w.row(id, i2), row.data(), k);
        } else {
          for (int64_t i0 = 0; i0 < k; ++i0) row[i0] = static_cast<float>(w.get(i0, id, i2));
        }
        for (int64_t i0 = 0; i0 < k; ++i0) {
          ASSERT_EQ(d.get(i0, r, i2), row[i0]) << type_str(wt) << " row " << id << " [" << i0 << "]";
        }
      }
    }
  }
}

TEST(OpsCpy, FloatTypesAnyLayoutAndReshape) {
  std::mt19937 rng(22);
  const DType types[] = {DType::F32, DType::F16, DType::BF16};
  for (DType from : types) {
    for (DType to : types) {
      for (Layout ls : {Layout::Contiguous, Layout::Permuted, Layout::Strided0}) {
        HostTensor s(from, {6, 4, 3, 1}, ls);
        s.fill_uniform(rng, -70000, 70000);   // past F16's range: overflow to inf
        s.set(0, 0, 0, 0, 1.0 + 1.0 / 2048);  // an F16 tie: rounds to even
        s.set(1, 0, 0, 0, 3.0e-6);            // an F16 subnormal
        auto round_to = [&](double v) -> double {
          const float f = static_cast<float>(v);
          return to == DType::F16 ? round_f16(f) : to == DType::BF16 ? round_bf16(f) : f;
        };
        // Same shape, a different layout.
        HostTensor d(to, {6, 4, 3, 1}, ls == Layout::Contiguous ? Layout::Padded : Layout::Contiguous);
        run_checked(make_call(OpKind::Cpy, d, {&s}), d);
        const std::string where = type_str(from) + " -> " + type_str(to) + " " + layout_name(ls);
        expect_near(
            d,
            [&](int64_t i0, int64_t i1, int64_t i2, int64_t i3) { return round_to(s.get(i0, i1, i2, i3)); },
            0, 0, where);
        // Another shape with the same element count: elements pair up in row-major order.
        HostTensor r(to, {8, 9, 1, 1}, Layout::Strided0);
        run_checked(make_call(OpKind::Cpy, r, {&s}), r);
        expect_near(
            r,
            [&](int64_t i0, int64_t i1, int64_t, int64_t) {
              const int64_t flat = i1 * 8 + i0;
              return round_to(s.get(flat % 6, (flat / 6) % 4, flat / 24, 0));
            },
            0, 0, where + " reshaped");
      }
    }
  }
}

TEST(OpsCpy, F32IntoQuantizedCacheRowsAndBack) {
  std::mt19937 rng(23);
  const DType targets[] = {DType::Q8_0, DType::Q4_0, DType::Q4_1, DType::Q5_0, DType::Q5_1, DType::IQ4_NL};
  for (DType t : targets) {
    HostTensor s(DType::F32, {96, 5, 2, 1}, Layout::Permuted);
    s.fill_uniform(rng, -3, 3);
    HostTensor q(t, {96, 5, 2, 1}, Layout::Padded);
    run_checked(make_call(OpKind::Cpy, q, {&s}), q);
    // Back to F32 through the same kernel; each value within its block's quantization step.
    HostTensor back(DType::F32, {96, 5, 2, 1});
    run_checked(make_call(OpKind::Cpy, back, {&q}), back);
    // Worst error per value as a fraction of the block's max |x|: half a step for Q8_0 (step
    // amax/127) and the min/max formats (step range/15 or range/31, range <= 2 amax); a whole step
    // for Q4_0/Q5_0, whose scale maps the signed max to -8 / -16 and clamps the other side; IQ4_NL's
    // widest grid gap and clamp.
    double frac = 0;
    switch (t) {
      case DType::Q8_0:
        frac = 0.51 / 127;
        break;
      case DType::Q4_0:
        frac = 1.0 / 8;
        break;
      case DType::Q4_1:
        frac = 0.51 * 2 / 15;
        break;
      case DType::Q5_0:
        frac = 1.0 / 16;
        break;
      case DType::Q5_1:
        frac = 0.51 * 2 / 31;
        break;
      default:
        frac = 0.15;
        break;
    }
    for (int64_t i2 = 0; i2 < 2; ++i2)
      for (int64_t i1 = 0; i1 < 5; ++i1)
        for (int64_t b = 0; b < 3; ++b) {
          double amax = 0;
          for (int64_t i = 0; i < 32; ++i) amax = std::max(amax, std::fabs(s.get(b * 32 + i, i1, i2)));
          // Plus the F16 rounding of the block scale times the largest level.
          const double tol = amax * (frac + 1e-3) + 1e-6;
          for (int64_t i = 0; i < 32; ++i) {
            const int64_t i0 = b * 32 + i;
            ASSERT_LE(std::fabs(back.get(i0, i1, i2) - s.get(i0, i1, i2)), tol)
                << dtype_name(t) << " at [" << i0 << ", " << i1 << ", " << i2 << "]";
          }
        }
    // The quantized bytes are a whole-row conversion: the same as quantizing the row directly.
    std::vector<float> row(96);
    std::vector<uint8_t> direct(row_size(t, 96));
    for (int64_t i = 0; i < 96; ++i) row[i] = static_cast<float>(s.get(i, 3, 1));
    quant_traits(t)->from_float(row.data(), direct.data(), 96);
    EXPECT_EQ(std::memcmp(direct.data(), q.row(3, 1), direct.size()), 0) << dtype_name(t);
  }
}

// SetRows writes each src row into the dst row its id names, converted as the dst type's
// from_float converts a row, and leaves every other dst byte as it was; ids outside the dst write
// nothing.
TEST(OpsSetRows, RowsLandWhereTheirIdsSayAndNothingElseMoves) {
  std::mt19937 rng(24);
  for (DType t : {DType::F32, DType::F16, DType::BF16, DType::Q8_0}) {
    const int64_t k = 64, n_dst = 7;
    HostTensor s(DType::F32, {k, 4, 2, 1}, Layout::Padded);
    s.fill_uniform(rng, -3, 3);
    HostTensor ids(DType::I32, {4, 2, 1, 1});
    const int32_t id_values[2][4] = {{5, 0, -1, 3}, {6, 7, 2, 1}};  // -1 and 7 are outside the dst
    for (int64_t i1 = 0; i1 < 2; ++i1)
      for (int64_t i0 = 0; i0 < 4; ++i0) ids.set(i0, i1, 0, 0, id_values[i1][i0]);
    HostTensor d(t, {k, n_dst, 2, 1}, Layout::Padded);
    std::vector<float> before(static_cast<size_t>(k * n_dst * 2));
    for (float& v : before) v = std::uniform_real_distribution<float>(-1, 1)(rng);
    if (info(t).quantized) {
      d.set_quantized(before);
    } else {
      size_t i = 0;
      for (int64_t i2 = 0; i2 < 2; ++i2)
        for (int64_t i1 = 0; i1 < n_dst; ++i1)
          for (int64_t i0 = 0; i0 < k; ++i0) d.set(i0, i1, i2, 0, before[i++]);
    }
    const size_t row_bytes = row_size(t, k);
    std::vector<std::vector<uint8_t>> old_rows;
    for (int64_t i2 = 0; i2 < 2; ++i2)
      for (int64_t i1 = 0; i1 < n_dst; ++i1) old_rows.emplace_back(d.row(i1, i2), d.row(i1, i2) + row_bytes);
    run_checked(make_call(OpKind::SetRows, d, {&s, &ids}), d);
    std::vector<float> src_row(static_cast<size_t>(k));
    std::vector<uint8_t> want(row_bytes);
    for (int64_t i2 = 0; i2 < 2; ++i2) {
      for (int64_t i1 = 0; i1 < n_dst; ++i1) {
        int64_t from = -1;
        for (int64_t r = 0; r < 4; ++r) from = id_values[i2][r] == i1 ? r : from;
        if (from < 0) {
          want = old_rows[static_cast<size_t>(i2 * n_dst + i1)];
        } else {
          for (int64_t i0 = 0; i0 < k; ++i0)
            src_row[static_cast<size_t>(i0)] = static_cast<float>(s.get(i0, from, i2));
          quant_traits(t)->from_float(src_row.data(), want.data(), k);
        }
        EXPECT_EQ(std::memcmp(d.row(i1, i2), want.data(), row_bytes), 0)
            << type_str(t) << " dst row " << i1 << " of plane " << i2 << (from < 0 ? " (not written)" : "");
      }
    }
    if (t == DType::F16) {  // the conversion is F16's rounding
      const int64_t r = 3;  // src row 3 of plane 0 went to dst row 3
      for (int64_t i0 = 0; i0 < k; ++i0)
        ASSERT_EQ(d.get(i0, r, 0), round_f16(static_cast<float>(s.get(i0, r, 0))));
    }
  }
}

TEST(OpsSetRows, RejectsWhatItCannotWrite) {
  HostTensor s(DType::F32, {64, 4, 1, 1}), s16(DType::F16, {64, 4, 1, 1}), narrow(DType::F32, {32, 4, 1, 1});
  HostTensor ids(DType::I32, {4, 1, 1, 1}), ids_f(DType::F32, {4, 1, 1, 1}),
      ids_short(DType::I32, {3, 1, 1, 1});
  HostTensor d(DType::F16, {64, 9, 1, 1}), strided(DType::F16, {64, 9, 1, 1}, Layout::Strided0);
  EXPECT_TRUE(kernel_supported(make_call(OpKind::SetRows, d, {&s, &ids})));
  EXPECT_FALSE(kernel_supported(make_call(OpKind::SetRows, d, {&s16, &ids})));      // src not F32
  EXPECT_FALSE(kernel_supported(make_call(OpKind::SetRows, d, {&s, &ids_f})));      // ids not I32
  EXPECT_FALSE(kernel_supported(make_call(OpKind::SetRows, d, {&s, &ids_short})));  // one id per row
  EXPECT_FALSE(kernel_supported(make_call(OpKind::SetRows, d, {&narrow, &ids})));   // row widths differ
  EXPECT_FALSE(kernel_supported(make_call(OpKind::SetRows, strided, {&s, &ids})));  // dst rows not contiguous
  EXPECT_FALSE(kernel_supported(make_call(OpKind::SetRows, d, {&s})));
}

TEST(OpsMulMat, DecodeSizedQ4_0IsMilliseconds) {
  // A 4096 x 4096 Q4_0 matmul with one activation row: llama.cpp does this in about 1-3 ms on
  // one modern core; require well under a second so a pathological path cannot hide.
  const int64_t n = 4096;
  HostTensor w(DType::Q4_0, {n, n, 1, 1}), a(DType::F32, {n, 1, 1, 1}), d(DType::F32, {n, 1, 1, 1});
  std::mt19937 rng(24);
  a.fill_uniform(rng, -1, 1);
  uint32_t lcg = 12345;
  for (int64_t r = 0; r < n; ++r) {
    uint8_t* p = reinterpret_cast<uint8_t*>(w.row(r));
    for (size_t i = 0; i < w.view().row_bytes(); ++i) {
      lcg = lcg * 1664525u + 1013904223u;
      p[i] = static_cast<uint8_t>(lcg >> 24);
    }
    for (int64_t b = 0; b < n / 32; ++b) {
      const uint16_t scale = f32_to_f16(0.01f);
      std::memcpy(p + b * 18, &scale, 2);
    }
  }
  const OpCall call = make_call(OpKind::MulMat, d, {&w, &a});
  const KernelPlan plan = plan_kernel(call);
  std::vector<uint8_t> scratch(plan.scratch_bytes + kScratchAlign);
  void* s = scratch.data() + (kScratchAlign - reinterpret_cast<uintptr_t>(scratch.data()) % kScratchAlign);
  double best_ms = 1e9;
  for (int rep = 0; rep < 3; ++rep) {
    const auto t0 = std::chrono::steady_clock::now();
    for (int ph = 0; ph < plan.n_phases; ++ph) run_kernel(call, ph, 0, plan.units[ph], s);
    best_ms = std::min(
        best_ms, std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  RecordProperty("q4_0_4096x4096_ms", std::to_string(best_ms));
  std::printf("mul_mat q4_0 4096x4096 x 1: %.2f ms (one thread)\n", best_ms);
  EXPECT_LT(best_ms, 500.0);
}

}  // namespace
}  // namespace kiln::test
