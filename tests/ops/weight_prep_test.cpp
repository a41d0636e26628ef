// Weight preparation: the copy the kernels read is a pure function of the plain bytes.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "ops/weight_prep.h"

namespace kiln {
namespace {

TEST(WeightPrep, PlainCopyReproducesTheBytesAndTheView) {
  std::vector<float> w(64 * 3);
  for (size_t i = 0; i < w.size(); ++i) w[i] = static_cast<float>(i) * 0.5f - 7.0f;
  const TensorView src = contiguous_view(DType::F32, {64, 3, 1, 1}, w.data());
  const WeightPlacement p = choose_weight_layout(src);
  ASSERT_EQ(p.bytes, src.span_bytes());
  std::vector<float> a(w.size(), -1.0f), b(w.size(), -2.0f);
  ASSERT_TRUE(prepare_weight(src, p, a.data()).ok());
  ASSERT_TRUE(prepare_weight(src, p, b.data()).ok());
  EXPECT_EQ(a, w);
  EXPECT_EQ(a, b);
  const TensorView v = prepared_view(src, p, a.data());
  EXPECT_EQ(v.layout, p.layout);
  EXPECT_EQ(v.ne, src.ne);
  EXPECT_EQ(v.nb, src.nb);
  EXPECT_EQ(v.data, a.data());
}

TEST(WeightPrep, RefusesStridedTensorsAndWrongSizes) {
  std::vector<float> w(64 * 4);
  TensorView strided = contiguous_view(DType::F32, {64, 2, 1, 1}, w.data());
  strided.nb[1] *= 2;  // every other row
  std::vector<float> dst(w.size());
  const Status s = prepare_weight(strided, {TensorLayout::Plain, strided.span_bytes()}, dst.data());
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error().message.find("not a contiguous plain tensor"), std::string::npos) << s.error().message;
  const TensorView flat = contiguous_view(DType::F32, {64, 2, 1, 1}, w.data());
  EXPECT_FALSE(prepare_weight(flat, {TensorLayout::Plain, flat.span_bytes() + 4}, dst.data()).ok());
}

}  // namespace
}  // namespace kiln
