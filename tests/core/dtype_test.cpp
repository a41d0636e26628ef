#include "core/dtype.h"

#include <gtest/gtest.h>

#include "core/result.h"

namespace kiln {
namespace {

TEST(DType, BlockLayoutsMatchGgml) {
  EXPECT_EQ(type_size(DType::Q4_0), 18u);
  EXPECT_EQ(block_size(DType::Q4_K), 256);
  EXPECT_EQ(type_size(DType::Q6_K), 210u);
  EXPECT_EQ(type_size(DType::Q8_K), 292u);
  EXPECT_EQ(row_size(DType::Q8_0, 64), 68u);
  EXPECT_EQ(row_size(DType::F16, 3), 6u);
}

TEST(DType, UnknownIdsAreRejected) {
  EXPECT_FALSE(dtype_info(4).has_value());   // retired Q4_2
  EXPECT_FALSE(dtype_info(31).has_value());  // retired Q4_0_4_4
  EXPECT_FALSE(dtype_info(40).has_value());
  EXPECT_FALSE(dtype_info(0xffffffffu).has_value());
  ASSERT_TRUE(dtype_info(20).has_value());
  EXPECT_EQ(dtype_info(20)->name, "iq4_nl");
}

TEST(DType, NamesRoundTrip) {
  EXPECT_EQ(dtype_from_name("Q4_K"), DType::Q4_K);
  EXPECT_EQ(dtype_from_name("bf16"), DType::BF16);
  EXPECT_FALSE(dtype_from_name("q4_2").has_value());
}

TEST(Result, CarriesValueOrError) {
  Result<int> good = 3;
  ASSERT_TRUE(good.ok());
  EXPECT_EQ(*good, 3);
  Result<int> bad = make_error("gguf: key '", "x", "' count ", 7, " too large");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().message, "gguf: key 'x' count 7 too large");
  auto chain = [](bool fail) -> Status {
    auto inner = [&]() -> Result<int> {
      if (fail) return make_error("inner failed");
      return 1;
    };
    KILN_ASSIGN_OR_RETURN(int v, inner());
    EXPECT_EQ(v, 1);
    return ok_status();
  };
  EXPECT_TRUE(chain(false).ok());
  EXPECT_EQ(chain(true).error().message, "inner failed");
}

}  // namespace
}  // namespace kiln
