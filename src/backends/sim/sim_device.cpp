#include "backends/sim/sim_device.h"

#include <sys/mman.h>

#include <algorithm>
#include <cstdint>
#include <cstring>

namespace kiln {

class SimDevice::SimBuffer : public Buffer {
 public:
  SimBuffer(SimDevice& device, size_t offset, size_t size, MemoryKind kind, std::string owner)
      : Buffer(device, device.device_base_ + offset, size, kind, std::move(owner), /*host_visible=*/false,
               /*writable=*/true),
        offset_(offset) {}
  ~SimBuffer() override { static_cast<SimDevice&>(device()).release(offset_, size(), kind()); }

 private:
  size_t offset_;
};

Result<std::unique_ptr<SimDevice>> SimDevice::create(const SimDeviceOptions& options) {
  const size_t align = options.alignment;
  if (align < 64 || (align & (align - 1)) != 0) {
    return make_error("sim: device '", options.name, "': alignment ", align, " is not a power of two >= 64");
  }
  const size_t capacity = options.capacity - options.capacity % align;
  if (capacity == 0) {
    return make_error("sim: device '", options.name, "': capacity ", options.capacity,
                      " bytes is below one block of ", align);
  }
  std::unique_ptr<SimDevice> dev(new SimDevice());
  dev->name_ = options.name;
  dev->capacity_ = capacity;
  dev->alignment_ = align;
  // Device addresses: reserved without access so that a host dereference faults. Host memory:
  // committed lazily by the kernel as it is touched.
  void* va = mmap(nullptr, capacity, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (va == MAP_FAILED) {
    return make_error("sim: device '", options.name, "': cannot reserve ", capacity,
                      " bytes of address space");
  }
  dev->device_base_ = static_cast<char*>(va);
  void* pool =
      mmap(nullptr, capacity, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (pool == MAP_FAILED) {
    return make_error("sim: device '", options.name, "': cannot map a pool of ", capacity, " bytes");
  }
  dev->pool_ = static_cast<char*>(pool);
  dev->alloc_ = std::make_unique<BlockAllocator>(capacity, align);
  if (!options.shared_dir.empty()) {
    auto ledger = SimLedger::open(options.shared_dir);
    if (!ledger.ok()) return make_error("sim: device '", options.name, "': ", ledger.error().message);
    dev->ledger_ = std::move(*ledger);
  }
  return dev;
}

SimDevice::~SimDevice() {
  if (pool_ != nullptr) munmap(pool_, capacity_);
  if (device_base_ != nullptr) munmap(device_base_, capacity_);
}

size_t SimDevice::others_used() const {
  if (!ledger_) return 0;
  const size_t all = ledger_->used(name_);
  return all - std::min(all, alloc_->used());
}

MemoryInfo SimDevice::memory_info() const {
  std::lock_guard<std::mutex> lock(mu_);
  const size_t used = std::min(capacity_, alloc_->used() + others_used());
  return MemoryInfo{capacity_, capacity_ - used};
}

std::optional<size_t> SimDevice::largest_free_block() const {
  std::lock_guard<std::mutex> lock(mu_);
  const size_t others = others_used();
  return std::min(alloc_->largest_free(), capacity_ - std::min(capacity_, alloc_->used() + others));
}

size_t SimDevice::peak_used() const {
  std::lock_guard<std::mutex> lock(mu_);
  return peak_used_;
}

void SimDevice::reset_peak_used() {
  std::lock_guard<std::mutex> lock(mu_);
  peak_used_ = alloc_->used();
}

Result<std::unique_ptr<Buffer>> SimDevice::allocate(const BufferDesc& desc) {
  std::optional<size_t> offset;
  size_t block = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    offset = alloc_->allocate(desc.bytes);
    if (!offset) {
      return make_error(name_, ": out of memory: cannot allocate ", desc.bytes, " bytes for '", desc.owner,
                        "' (", memory_kind_name(desc.kind), "): ", capacity_ - alloc_->used(),
                        " bytes free of capacity ", capacity_, ", largest free block ",
                        alloc_->largest_free());
    }
    block = alloc_->block_size(desc.bytes);
    if (ledger_) {
      if (Status shared = ledger_->reserve(name_, block, capacity_); !shared.ok()) {
        alloc_->free(*offset, desc.bytes);
        return make_error(name_, ": out of memory: cannot allocate ", desc.bytes, " bytes for '", desc.owner,
                          "' (", memory_kind_name(desc.kind), "): the capacity is shared, ",
                          shared.error().message);
      }
    }
    peak_used_ = std::max(peak_used_, alloc_->used());
  }
  std::memset(pool_ + *offset, kPoisonByte, block);  // the block is ours alone now
  note_allocated(desc.kind, desc.bytes);
  return std::unique_ptr<Buffer>(new SimBuffer(*this, *offset, desc.bytes, desc.kind, desc.owner));
}

void SimDevice::release(size_t offset, size_t bytes, MemoryKind kind) {
  std::memset(pool_ + offset, kPoisonByte, alloc_->block_size(bytes));  // still ours: freed below
  {
    std::lock_guard<std::mutex> lock(mu_);
    alloc_->free(offset, bytes);
    if (ledger_) ledger_->release(name_, alloc_->block_size(bytes));
  }
  note_freed(kind, bytes);
}

void* SimDevice::host_address(const void* addr, size_t n) const {
  const uintptr_t a = reinterpret_cast<uintptr_t>(addr);
  const uintptr_t base = reinterpret_cast<uintptr_t>(device_base_);
  if (a < base || a - base > capacity_ || n > capacity_ - (a - base)) return nullptr;
  return pool_ + (a - base);
}

}  // namespace kiln
