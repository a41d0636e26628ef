// DecodeMemory: image decodes in flight share one capacity; a decode that does not fit beside the
// others is refused at once (the server answers 503), and a lease gives its bytes back when it goes.
#include "serve/decode_memory.h"

#include <gtest/gtest.h>

#include <utility>

namespace kiln::serve {
namespace {

TEST(DecodeMemory, DecodesShareOneCapacity) {
  constexpr int64_t kSide = 64;
  constexpr size_t kOne = kSide * kSide * DecodeMemory::kBytesPerPixel;
  DecodeMemory memory(2 * kOne + kOne / 2);
  DecodeMemory::Lease a, b, c;
  ASSERT_TRUE(memory.take(kSide, kSide, a));
  ASSERT_TRUE(memory.take(kSide, kSide, b));
  EXPECT_EQ(memory.in_use(), 2 * kOne);
  EXPECT_FALSE(memory.take(kSide, kSide, c));  // a third does not fit now
  EXPECT_EQ(c.bytes(), 0u);
  {
    DecodeMemory::Lease moved = std::move(a);  // the hold moves, it is not given back twice
    EXPECT_EQ(memory.in_use(), 2 * kOne);
  }
  EXPECT_EQ(memory.in_use(), kOne);
  EXPECT_TRUE(memory.take(kSide, kSide, c));
  EXPECT_FALSE(memory.take(4 * kSide, 4 * kSide, a));  // more than the whole capacity
  b = DecodeMemory::Lease();
  c = DecodeMemory::Lease();
  EXPECT_EQ(memory.in_use(), 0u);
}

}  // namespace
}  // namespace kiln::serve
