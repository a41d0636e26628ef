// Counts calls of the global operator new (all threads) while a CountAllocations object lives.
// This test binary replaces operator new/delete (alloc_counter.cpp) to do it.
#pragma once

#include <cstdint>

namespace kiln::test {

class CountAllocations {
 public:
  CountAllocations();
  ~CountAllocations();
  CountAllocations(const CountAllocations&) = delete;
  CountAllocations& operator=(const CountAllocations&) = delete;
  // Allocations since construction.
  int64_t count() const;
};

}  // namespace kiln::test
