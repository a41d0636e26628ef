// CpuDevice: host RAM. Buffers are host-visible, 64-byte aligned allocations, or non-owning
// wrappers of memory owned elsewhere (an mmap'd GGUF file) so that models load without copying.
// Thread-safe.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "runtime/device.h"

namespace kiln {

class CpuDevice : public Device {
 public:
  static constexpr size_t kAlignment = 64;

  const std::string& name() const override { return name_; }
  bool is_host() const override { return true; }
  // total: physical RAM; free: the kernel's MemAvailable estimate (/proc/meminfo), or free pages.
  MemoryInfo memory_info() const override;
  // MemAvailable (what the kernel estimates can be allocated without swapping); nullopt when
  // /proc/meminfo cannot be read.
  std::optional<size_t> largest_free_block() const override;
  size_t alignment() const override { return kAlignment; }
  Result<std::unique_ptr<Buffer>> allocate(const BufferDesc& desc) override;
  // Any non-null host address is host memory.
  void* host_address(const void* addr, size_t n) const override { return const_cast<void*>(addr); }

  // A buffer over [data, data + bytes) owned elsewhere; it must outlive the buffer. Not counted
  // in allocated_bytes(). writable = false refuses Buffer::write (for read-only mappings).
  std::unique_ptr<Buffer> wrap(const void* data, size_t bytes, MemoryKind kind, std::string owner,
                               bool writable);

 private:
  class HostBuffer;
  std::string name_ = "cpu";
};

}  // namespace kiln
