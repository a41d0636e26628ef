// Device and Buffer: where tensors live.
//
// A Device owns memory (host RAM, the sim pool, later a GPU) and reports its total and free
// bytes. A Buffer is one allocation from a Device, tagged with an owner ("llama-1b") and a kind
// (weights, KV cache, compute arena, backend scratch) so that a residency manager can account
// for and later evict it. Buffers that are not host-visible hand out device addresses for
// TensorViews that callers must not dereference: data moves in and out only through the explicit
// copies below (upload / download, Buffer::write / read), as with a GPU.
//
// Ownership: a Buffer returns its memory to its Device when destroyed and must not outlive it.
// Thread-safety: Device methods are thread-safe; a Buffer's copies are as thread-safe as the
// bytes they touch.
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "core/result.h"
#include "core/tensor_view.h"

namespace kiln {

enum class MemoryKind : uint8_t { Weights, Kv, Compute, Scratch };
inline constexpr int kMemoryKindCount = 4;
const char* memory_kind_name(MemoryKind kind);  // "weights", "kv", "compute", "scratch"

struct MemoryInfo {
  size_t total = 0;  // bytes the device has
  size_t free = 0;   // bytes an allocation could still get (a pool: capacity minus used)
};

struct BufferDesc {
  size_t bytes = 0;
  MemoryKind kind = MemoryKind::Compute;
  std::string owner;  // who the memory is for: a model name, "arena", ...
};

class Device;
class ResidencyManager;

class Buffer {
 public:
  virtual ~Buffer() = default;
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;

  Device& device() const { return *device_; }
  size_t size() const { return size_; }
  MemoryKind kind() const { return kind_; }
  const std::string& owner() const { return owner_; }
  // Whether base() may be dereferenced by the CPU.
  bool host_visible() const { return host_visible_; }
  bool writable() const { return writable_; }
  // Device address of byte 0, for TensorViews over this buffer.
  void* base() const { return base_; }

  // A contiguous view of `type` with sizes `ne` at byte `offset`; an Error if it does not fit.
  Result<TensorView> view(DType type, std::array<int64_t, kMaxDims> ne, size_t offset = 0) const;
  // Copies host bytes in / out of [offset, offset + n); an Error when out of range or read-only.
  Status write(size_t offset, const void* src, size_t n);
  Status read(size_t offset, void* dst, size_t n) const;

 protected:
  Buffer(Device& device, void* base, size_t size, MemoryKind kind, std::string owner, bool host_visible,
         bool writable)
      : device_(&device),
        base_(base),
        size_(size),
        kind_(kind),
        owner_(std::move(owner)),
        host_visible_(host_visible),
        writable_(writable) {}

 private:
  Device* device_;
  void* base_;
  size_t size_;
  MemoryKind kind_;
  std::string owner_;
  bool host_visible_;
  bool writable_;
};

class Device {
 public:
  virtual ~Device() = default;

  virtual const std::string& name() const = 0;  // "cpu", "sim0"
  // Host devices hand out host-visible buffers and run kernels on their memory directly.
  virtual bool is_host() const = 0;
  virtual MemoryInfo memory_info() const = 0;
  // Alignment of every buffer base (a power of two); compute arenas align tensors to it.
  virtual size_t alignment() const = 0;
  // A new buffer of desc.bytes; an Error naming the bytes and what is free when it cannot.
  virtual Result<std::unique_ptr<Buffer>> allocate(const BufferDesc& desc) = 0;
  // The CPU address of device bytes [addr, addr + n), or nullptr when that range is not memory of
  // this device. For code that computes on the host (kernels of host and sim backends, copies).
  virtual void* host_address(const void* addr, size_t n) const = 0;
  // Whether device bytes [addr, addr + n) lie inside one live buffer of this device (what a plan's
  // views are checked against before they run). Host-addressable devices: host_address() != null.
  virtual bool holds(const void* addr, size_t n) const { return host_address(addr, n) != nullptr; }
  // Whether kernels on this device read the weight layouts the CPU's kernels prepare
  // (ops/weight_prep.h). Devices with kernels of their own (a GPU) read every weight plain.
  virtual bool reads_host_weight_layouts() const { return true; }
  // The largest single allocation that could succeed now: a fixed pool's largest free block (free
  // bytes in separate holes are not room for one buffer), the host's available memory; nullopt
  // where allocate() alone knows. The residency manager refuses allocations above it.
  virtual std::optional<size_t> largest_free_block() const { return std::nullopt; }
  // The memory --fit leaves free on this device when the user gives no -fitt (llama.cpp's 1024 MiB:
  // what drivers and other processes may still take). A device whose memory is all its own (a sim
  // pool) leaves none.
  virtual size_t default_fit_target() const { return size_t{1} << 30; }
  // The manager that keeps this device's memory within its budget (runtime/residency.h), or null:
  // set by the manager while it lives.
  ResidencyManager* residency() const { return residency_; }

  // Copies host bytes into / out of a contiguous view over this device's memory. `n` must equal
  // the view's bytes.
  Status upload(const TensorView& dst, const void* src, size_t n);
  Status download(const TensorView& src, void* dst, size_t n) const;

  // Bytes held by live buffers allocated from this device, by kind (wrapped external memory is
  // not counted), and the number of allocate() calls that succeeded (tests use it to prove a
  // path allocates nothing).
  size_t allocated_bytes(MemoryKind kind) const {
    return allocated_[static_cast<int>(kind)].load(std::memory_order_relaxed);
  }
  uint64_t allocation_count() const { return allocation_count_.load(std::memory_order_relaxed); }

 protected:
  // The copies behind upload / download and Buffer::write / read, after their range checks: n > 0
  // bytes at device address `dst` / `src`, inside one live buffer of this device. The defaults copy
  // through host_address() (host memory, the sim pool); a device the CPU cannot address (a GPU)
  // overrides both with transfers of its own, finished when they return. An Error when the
  // transfer fails.
  virtual Status copy_in(void* dst, const void* src, size_t n);
  virtual Status copy_out(const void* src, void* dst, size_t n) const;

  void note_allocated(MemoryKind kind, size_t bytes);
  void note_freed(MemoryKind kind, size_t bytes);

 private:
  std::array<std::atomic<size_t>, kMemoryKindCount> allocated_{};
  std::atomic<uint64_t> allocation_count_{0};
  friend class ResidencyManager;
  friend class Buffer;  // its write / read are copy_in / copy_out
  ResidencyManager* residency_ = nullptr;
};

}  // namespace kiln
