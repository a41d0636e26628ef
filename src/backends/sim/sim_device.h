// SimDevice: a simulated accelerator with its own memory pool of a hard capacity, whose buffers
// are not host-visible. Buffers hand out device addresses inside an address range reserved with
// no access rights, so dereferencing one on the host faults at once; data moves in and out only
// through Device::upload / download and Buffer::write / read, like a GPU's. Allocation is best
// fit over a coalescing free list (runtime/block_allocator.h); a request that does not fit gets
// an Error naming the bytes requested, free, the capacity and the largest free block.
// Memory is poisoned: every block is filled with kPoisonByte when it is allocated and again when
// it is freed (0xFF bytes read as NaN floats), so code that reads memory it never wrote, or keeps
// using an address after its buffer went (a restore that forgot a copy, a plan over an evicted
// buffer), computes visibly wrong numbers instead of finding the old bytes by luck.
// With a shared directory (--sim-shared DIR) the capacity is shared with the sim devices of the
// same name in every process that names DIR (backends/sim/sim_ledger.h): an allocation must fit
// both its own pool and what the other processes leave of the capacity, and the free memory
// reported is the capacity less every process's use.
// The sim backend computes on it with the host kernels (backends/sim/sim_backend.h).
// Thread-safe.
#pragma once

#include <memory>
#include <mutex>
#include <string>

#include "backends/sim/sim_ledger.h"
#include "runtime/block_allocator.h"
#include "runtime/device.h"

namespace kiln {

struct SimDeviceOptions {
  std::string name = "sim0";
  size_t capacity = 0;     // bytes, > 0; rounded down to the alignment
  size_t alignment = 256;  // a power of two, >= 64
  std::string shared_dir = {};  // non-empty: share the capacity with other processes (SimLedger)
};

class SimDevice : public Device {
 public:
  static Result<std::unique_ptr<SimDevice>> create(const SimDeviceOptions& options);
  ~SimDevice() override;
  SimDevice(const SimDevice&) = delete;
  SimDevice& operator=(const SimDevice&) = delete;

  const std::string& name() const override { return name_; }
  bool is_host() const override { return false; }
  MemoryInfo memory_info() const override;  // total: the capacity; free: capacity minus used
  size_t alignment() const override { return alignment_; }
  Result<std::unique_ptr<Buffer>> allocate(const BufferDesc& desc) override;
  void* host_address(const void* addr, size_t n) const override;

  std::optional<size_t> largest_free_block() const override;
  size_t default_fit_target() const override { return 0; }  // no driver: the pool is all there is
  // The most bytes in use at once since creation or the last reset_peak_used() (for tests that
  // check a budget was never passed), and a reset to what is in use now.
  size_t peak_used() const;
  void reset_peak_used();

  static constexpr unsigned char kPoisonByte = 0xFF;

 private:
  class SimBuffer;
  SimDevice() = default;
  void release(size_t offset, size_t bytes, MemoryKind kind);

  std::string name_;
  size_t capacity_ = 0;
  size_t alignment_ = 0;
  char* device_base_ = nullptr;  // reserved, inaccessible address range of capacity_ bytes
  char* pool_ = nullptr;         // the host memory behind it
  mutable std::mutex mu_;
  std::unique_ptr<BlockAllocator> alloc_;  // guarded by mu_
  size_t peak_used_ = 0;                   // guarded by mu_
  std::unique_ptr<SimLedger> ledger_;      // with a shared directory; reserved under mu_
  // Bytes the other processes sharing the capacity use now (0 without a ledger); under mu_.
  size_t others_used() const;
};

}  // namespace kiln
