#include "runtime/block_allocator.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <vector>

namespace kiln {
namespace {

TEST(BlockAllocator, BestFitPicksSmallestFreeRange) {
  BlockAllocator a(1024, 64);
  const size_t b0 = *a.allocate(128), b1 = *a.allocate(64), b2 = *a.allocate(256), b3 = *a.allocate(64);
  EXPECT_EQ(b0, 0u);
  EXPECT_EQ(b1, 128u);
  EXPECT_EQ(b2, 192u);
  EXPECT_EQ(b3, 448u);
  a.free(b0, 128);  // hole of 128 at 0
  a.free(b2, 256);  // hole of 256 at 192
  // 100 bytes (-> 128) fits the 128 hole exactly: best fit takes it rather than the bigger one.
  EXPECT_EQ(*a.allocate(100), 0u);
  EXPECT_EQ(*a.allocate(200), 192u);
  EXPECT_EQ(a.used(), 128u + 64 + 256 + 64);
}

TEST(BlockAllocator, CoalescesNeighboursOnFree) {
  BlockAllocator a(1024, 256);
  const size_t b0 = *a.allocate(256), b1 = *a.allocate(256), b2 = *a.allocate(256), b3 = *a.allocate(256);
  EXPECT_FALSE(a.allocate(1).has_value());
  a.free(b0, 256);
  a.free(b2, 256);
  EXPECT_EQ(a.largest_free(), 256u);
  EXPECT_EQ(a.free_range_count(), 2u);
  EXPECT_FALSE(a.allocate(300).has_value());  // 512 free but fragmented
  a.free(b1, 256);                            // joins both neighbours
  EXPECT_EQ(a.free_range_count(), 1u);
  EXPECT_EQ(a.largest_free(), 768u);
  EXPECT_EQ(*a.allocate(700), 0u);
  a.free(0, 700);
  a.free(b3, 256);
  EXPECT_EQ(a.used(), 0u);
  EXPECT_EQ(a.largest_free(), 1024u);
  EXPECT_EQ(a.high_water(), 1024u);
}

TEST(BlockAllocator, RandomAllocFreeNeverOverlapsAndReturnsEverything) {
  std::mt19937 rng(7);
  BlockAllocator a(1 << 20, 64);
  struct Block {
    size_t off, bytes;
  };
  std::vector<Block> live;
  for (int step = 0; step < 4000; ++step) {
    if (live.empty() || rng() % 3 != 0) {
      const size_t bytes = 1 + rng() % 5000;
      auto off = a.allocate(bytes);
      if (!off) continue;
      EXPECT_EQ(*off % 64, 0u);
      for (const Block& b : live) {
        const bool disjoint = *off + a.block_size(bytes) <= b.off || b.off + a.block_size(b.bytes) <= *off;
        ASSERT_TRUE(disjoint) << "block at " << *off << " overlaps block at " << b.off;
      }
      live.push_back({*off, bytes});
    } else {
      const size_t i = rng() % live.size();
      a.free(live[i].off, live[i].bytes);
      live.erase(live.begin() + static_cast<std::ptrdiff_t>(i));
    }
  }
  for (const Block& b : live) a.free(b.off, b.bytes);
  EXPECT_EQ(a.used(), 0u);
  EXPECT_EQ(a.free_range_count(), 1u);
}

TEST(BlockAllocator, UnboundedGrowsHighWaterOnlyWhenNothingFits) {
  BlockAllocator a(BlockAllocator::kUnbounded, 64);
  const size_t x = *a.allocate(640);
  const size_t y = *a.allocate(64);
  a.free(x, 640);
  EXPECT_EQ(*a.allocate(600), 0u);  // reuses the hole
  EXPECT_EQ(a.high_water(), 704u);
  a.free(y, 64);
  EXPECT_EQ(*a.allocate(1000), 640u);  // the tail, merged with the freed 64 at 640
  EXPECT_EQ(a.high_water(), 640u + 1024);
}

}  // namespace
}  // namespace kiln
