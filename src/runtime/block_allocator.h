// BlockAllocator: places blocks in one address range [0, capacity) by best fit, with a free list
// kept sorted by offset and coalesced on every free. One allocator serves two places: the
// planner (capacity kUnbounded: it measures the high-water mark of a compute arena) and device
// memory pools with a hard capacity (the sim device).
// Only offsets are managed; no memory is touched. Not thread-safe: owners lock.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

namespace kiln {

class BlockAllocator {
 public:
  static constexpr size_t kUnbounded = SIZE_MAX;

  // alignment: a power of two; every offset and block size is a multiple of it.
  BlockAllocator(size_t capacity, size_t alignment);

  // Block size used for a request of `bytes` (rounded up to the alignment; 0 bytes -> one unit).
  size_t block_size(size_t bytes) const;
  // Offset of a new block for `bytes`: the smallest free range that fits (lowest offset on ties),
  // or nullopt when no free range is large enough.
  std::optional<size_t> allocate(size_t bytes);
  // Returns a block from allocate(offset, bytes as requested) to the free list, merging it with
  // free neighbours.
  void free(size_t offset, size_t bytes);

  size_t capacity() const { return capacity_; }
  size_t alignment() const { return alignment_; }
  size_t used() const { return used_; }
  // One past the highest byte ever allocated since construction or reset().
  size_t high_water() const { return high_water_; }
  // Largest single block allocate() could return now (bounded capacity: at most capacity - used).
  size_t largest_free() const;
  size_t free_range_count() const { return free_.size(); }
  void reset();

 private:
  struct Range {
    size_t offset;
    size_t size;
  };
  size_t capacity_;
  size_t alignment_;
  std::vector<Range> free_;  // sorted by offset, no two touching
  size_t used_ = 0;
  size_t high_water_ = 0;
};

}  // namespace kiln
