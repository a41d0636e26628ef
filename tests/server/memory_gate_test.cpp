// MemoryGate: work in flight (image decodes, pre-queue work) shares one capacity; work that does not
// fit beside the others is refused at once (the server answers 503), a counted gate makes work
// past its count wait a bounded time, and a lease gives its bytes and hold back when it goes.
#include "serve/memory_gate.h"

#include <gtest/gtest.h>

#include <chrono>
#include <thread>
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

// A gate with a count: a work past it waits for a hold to end, up to its wait, then is refused;
// bytes that do not fit are refused at once, without waiting.
TEST(MemoryGate, ACountedGateWaitsBoundedlyForAHoldToEnd) {
  using std::chrono::milliseconds;
  using Clock = std::chrono::steady_clock;
  MemoryGate jobs(1 << 20, 2);
  MemoryGate::Lease a, b, c;
  ASSERT_TRUE(jobs.take(1, a));
  ASSERT_TRUE(jobs.take(1, b));
  EXPECT_EQ(jobs.holds(), 2u);
  auto start = Clock::now();
  EXPECT_FALSE(jobs.take(1, c, milliseconds(100)));
  EXPECT_GE(Clock::now() - start, milliseconds(100));
  start = Clock::now();
  EXPECT_FALSE(jobs.take(2 << 20, c, milliseconds(5'000)));  // more bytes than all: no wait
  EXPECT_LT(Clock::now() - start, milliseconds(1'000));
  // A hold that ends lets a waiter in.
  std::thread ender([&] {
    std::this_thread::sleep_for(milliseconds(50));
    a = MemoryGate::Lease();
  });
  start = Clock::now();
  EXPECT_TRUE(jobs.take(1, c, milliseconds(10'000)));
  EXPECT_LT(Clock::now() - start, milliseconds(5'000));
  ender.join();
  EXPECT_EQ(jobs.holds(), 2u);
  b = MemoryGate::Lease();
  c = MemoryGate::Lease();
  EXPECT_EQ(jobs.holds(), 0u);
  EXPECT_EQ(jobs.in_use(), 0u);
}

}  // namespace
}  // namespace kiln::serve
