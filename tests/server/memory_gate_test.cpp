// MemoryGate: work in flight (image decodes, pre-queue work) shares one capacity; work that does not
// fit beside the others is refused at once (the server answers 503), and a lease gives its bytes
// back when it goes.
#include "serve/memory_gate.h"

#include <gtest/gtest.h>

#include <utility>

namespace kiln::serve {
namespace {

TEST(MemoryGate, HoldsShareOneCapacity) {
  constexpr size_t kOne = 64 << 10;
  MemoryGate memory(2 * kOne + kOne / 2);
  MemoryGate::Lease a, b, c;
  ASSERT_TRUE(memory.take(kOne, a));
  ASSERT_TRUE(memory.take(kOne, b));
  EXPECT_EQ(memory.in_use(), 2 * kOne);
  EXPECT_FALSE(memory.take(kOne, c));  // a third does not fit now
  EXPECT_EQ(c.bytes(), 0u);
  {
    MemoryGate::Lease moved = std::move(a);  // the hold moves, it is not given back twice
    EXPECT_EQ(memory.in_use(), 2 * kOne);
  }
  EXPECT_EQ(memory.in_use(), kOne);
  EXPECT_TRUE(memory.take(kOne, c));
  EXPECT_FALSE(memory.take(16 * kOne, a));  // more than the whole capacity
  b = MemoryGate::Lease();
  c = MemoryGate::Lease();
  EXPECT_EQ(memory.in_use(), 0u);
}

}  // namespace
}  // namespace kiln::serve
