// The memory breakdown: per device, its total and free memory, the residency budget, and each
// owner's resident bytes by kind, like llama.cpp's common_memory_breakdown_print. Filled by
// ResidencyManager::breakdown(); printed by `kiln run --verbose` at exit.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "runtime/device.h"

namespace kiln {

inline constexpr size_t kNoBudget = SIZE_MAX;

// One owner's memory on a device: resident bytes counted now, by kind (MemoryKind order).
struct OwnerMemory {
  uint64_t owner = 0;  // OwnerId
  std::string name;
  std::array<size_t, kMemoryKindCount> bytes{};
  size_t evicted_residents = 0;  // residents of this owner not on the device now
  bool pinned = false;
};

struct DeviceMemoryBreakdown {
  std::string device;
  size_t total = 0, free = 0;  // the device's own figures (MemoryInfo)
  size_t budget = kNoBudget;
  size_t counted = 0;      // bytes the residency manager counts now (what the budget limits)
  size_t unaccounted = 0;  // device memory kiln allocated outside any resident (backend scratch)
  std::vector<OwnerMemory> owners;
};

// `bytes` for a message: "12.80 GiB" (two decimals), or in MiB, KiB or bytes below a GiB, MiB, KiB.
std::string format_memory_size(size_t bytes);

// A table in MiB, one line per device and one per owner below it:
//   memory breakdown [MiB] | total   free budget counted | weights     kv compute evicted | unaccounted
//    - sim0                |  4096   3989   2048     107 |                                 |           0
//      - llama #3          |                             |     100      6       1       0 |
std::string format_memory_breakdown(std::span<const DeviceMemoryBreakdown> devices);

}  // namespace kiln
