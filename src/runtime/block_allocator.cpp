#include "runtime/block_allocator.h"

#include <algorithm>

#include "core/check.h"

namespace kiln {

BlockAllocator::BlockAllocator(size_t capacity, size_t alignment)
    : capacity_(capacity), alignment_(alignment) {
  KILN_ASSERT(alignment > 0 && (alignment & (alignment - 1)) == 0,
              "BlockAllocator: alignment not a power of two");
  if (capacity_ != kUnbounded) capacity_ -= capacity_ % alignment_;
  reset();
}

size_t BlockAllocator::block_size(size_t bytes) const {
  if (bytes == 0) return alignment_;
  if (bytes > SIZE_MAX - alignment_) return SIZE_MAX;  // cannot fit anywhere
  return (bytes + alignment_ - 1) & ~(alignment_ - 1);
}

void BlockAllocator::reset() {
  free_.clear();
  if (capacity_ > 0) free_.push_back({0, capacity_});
  used_ = 0;
  high_water_ = 0;
}

std::optional<size_t> BlockAllocator::allocate(size_t bytes) {
  const size_t size = block_size(bytes);
  size_t best = free_.size();
  for (size_t i = 0; i < free_.size(); ++i) {
    if (free_[i].size >= size && (best == free_.size() || free_[i].size < free_[best].size)) best = i;
  }
  if (best == free_.size()) return std::nullopt;
  const size_t offset = free_[best].offset;
  free_[best].offset += size;
  free_[best].size -= size;
  if (free_[best].size == 0) free_.erase(free_.begin() + static_cast<std::ptrdiff_t>(best));
  used_ += size;
  high_water_ = std::max(high_water_, offset + size);
  return offset;
}

void BlockAllocator::free(size_t offset, size_t bytes) {
  const size_t size = block_size(bytes);
  KILN_ASSERT(size <= used_, "BlockAllocator::free: more bytes than allocated");
  auto it = std::lower_bound(free_.begin(), free_.end(), offset,
                             [](const Range& r, size_t off) { return r.offset < off; });
  // The block must lie in a gap between free ranges (a double free would overlap one).
  KILN_ASSERT(it == free_.end() || offset + size <= it->offset,
              "BlockAllocator::free: block overlaps free range");
  KILN_ASSERT(it == free_.begin() || std::prev(it)->offset + std::prev(it)->size <= offset,
              "BlockAllocator::free: block overlaps free range");
  used_ -= size;
  const bool join_prev = it != free_.begin() && std::prev(it)->offset + std::prev(it)->size == offset;
  const bool join_next = it != free_.end() && offset + size == it->offset;
  if (join_prev && join_next) {
    std::prev(it)->size += size + it->size;
    free_.erase(it);
  } else if (join_prev) {
    std::prev(it)->size += size;
  } else if (join_next) {
    it->offset = offset;
    it->size += size;
  } else {
    free_.insert(it, Range{offset, size});
  }
}

size_t BlockAllocator::largest_free() const {
  size_t best = 0;
  for (const Range& r : free_) best = std::max(best, r.size);
  return best;
}

}  // namespace kiln
