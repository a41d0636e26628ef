// DeviceRegistry: the devices a process computes on, each with its backend, over one thread pool.
//
// The CPU ("cpu", host RAM) is always there. Vulkan devices ("vulkan0", "vulkan1", ...: GPUs through
// the Vulkan backend, backends/vulkan/) exist when the options ask for them and the build and the
// machine have them. Sim devices ("sim0", "sim1", ...: a pool that is not
// host-visible, see backends/sim/sim_device.h) exist when the options name them, each with its
// capacity. Every device has one backend, created with it; new_backend() makes another one over the
// same device and pool for a second context that computes at the same time (its kernel scratch is
// its own).
//
// Every device has a residency manager (runtime/residency.h), with the budget the options give it
// (none by default): everything contexts and weights allocate there is counted and evictable.
//
// Every device has one compute arena (arena(), made at its first use): the contexts, vision
// encoders and draft models of every model that computes on the device take turns in it, so it
// is sized for the largest of their worst-case graphs, not their sum. It is a resident of an
// owner of its own ("compute (DEVICE)", runtime/resident_arena.h): counted once, pinned by each
// user while it computes, evicted by LRU when idle and allocated again at the next use.
//
// Ownership: owns the pool, the devices, their residency managers, compute arenas and backends;
// everything allocated from a device (weights, KV caches, contexts) must be gone before the
// registry is destroyed.
// Thread-safety: immutable after create() but for the arenas, made under a mutex at their first
// use; devices, backends and arenas are as thread-safe as they say.
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "backends/cpu/cpu_device.h"
#include "backends/sim/sim_device.h"
#include "core/result.h"
#include "runtime/backend.h"
#include "runtime/residency.h"
#include "runtime/thread_pool.h"

namespace kiln {

class ComputeArena;
class ResidentArena;

// Capacity of a sim device whose size the options do not give (4 GiB).
inline constexpr size_t kDefaultSimCapacity = size_t{4} << 30;

// A memory budget (--max-mem DEVICE=GiB): gib >= 0 is the budget, gib < 0 leaves -gib GiB of the
// device's total memory out of it.
struct DeviceBudget {
  std::string device;
  double gib = 0;
};

struct DeviceRegistryOptions {
  int32_t n_threads = 0;              // threads of the shared pool; 0: every hardware thread
  std::vector<SimDeviceOptions> sim;  // sim devices to create, names "sim<N>", each at most once
  std::vector<DeviceBudget> budgets;  // devices without one have no budget
  // Non-empty: every sim device shares its capacity with the same-named sim devices of other
  // processes through a ledger in this directory (--sim-shared; backends/sim/sim_ledger.h).
  std::string sim_shared_dir = {};
  // Non-empty: every device's evicted KV caches keep their bytes in files here (--swap-dir; host
  // KV caches become evictable) instead of host memory. create() refuses a directory that cannot
  // hold them.
  std::string swap_dir = {};
  // Look for Vulkan devices (backends/vulkan/vulkan_devices.h); none found is not an error (notes()
  // says why).
  bool vulkan = false;
};

// The bytes `b` allows on a device of `total` bytes; an Error when that is not above zero.
Result<size_t> budget_bytes(const DeviceBudget& b, size_t total);

// What --list-devices prints of a device.
struct DeviceDescription {
  std::string name;         // "cpu", "sim0"
  std::string kind;         // "cpu", "sim"
  std::string description;  // "host RAM", "simulated accelerator (not host-visible)"
  MemoryInfo memory;        // total (capacity) and free bytes now
};

// Whether `name` is a sim device's: "sim" then a decimal number without leading zeros.
bool is_sim_device_name(std::string_view name);
// Whether `name` names a Vulkan device: "vulkan" or llama.cpp's "Vulkan", then a decimal number.
bool is_vulkan_device_name(std::string_view name);

class DeviceRegistry {
 public:
  // An Error for a sim device name that is not sim<N>, a name given twice, a capacity the
  // device refuses (SimDevice::create's message), or a swap directory that cannot hold files
  // ("--swap-dir DIR: reason").
  static Result<std::unique_ptr<DeviceRegistry>> create(const DeviceRegistryOptions& options);
  ~DeviceRegistry();
  DeviceRegistry(const DeviceRegistry&) = delete;
  DeviceRegistry& operator=(const DeviceRegistry&) = delete;

  ThreadPool& pool() const { return *pool_; }
  CpuDevice& cpu() const { return *cpu_; }
  // The device named `name` ("none" is llama.cpp's name for no offload: the CPU; "Vulkan0" is
  // vulkan0), or an Error that lists the devices there are.
  Result<Device*> find(std::string_view name) const;
  // The backend of `device`, which must be one of this registry's.
  Backend& backend(const Device& device) const;
  // Another backend over `device` (one of this registry's) and the same pool.
  std::unique_ptr<Backend> new_backend(Device& device) const;
  // Every device: the CPU first, then the Vulkan devices, then the sim devices in the order of the
  // options.
  std::vector<DeviceDescription> describe() const;
  // What --list-devices says besides the devices: a build without Vulkan, no Vulkan driver or
  // device found, devices skipped and why.
  const std::vector<std::string>& notes() const { return notes_; }
  // The residency manager of `device` (one of this registry's).
  ResidencyManager& residency(const Device& device) const;
  // Every device's memory as its residency manager counts it, in describe()'s order.
  std::vector<DeviceMemoryBreakdown> memory_breakdown() const;
  // The compute arena of `device` (one of this registry's), shared by everything that computes
  // there (ContextOptions::arena, VisionEncoderOptions::arena); made at the first call. Its
  // requirement only grows: a model unloaded leaves its worst case in it (the next allocation
  // after an eviction keeps that size).
  ComputeArena& arena(const Device& device) const;

 private:
  struct Entry;
  DeviceRegistry() = default;
  const Entry& entry(const Device& device) const;

  std::unique_ptr<ThreadPool> pool_;
  std::unique_ptr<CpuDevice> cpu_;
  std::vector<std::unique_ptr<Device>> gpus_;  // Vulkan devices
  std::vector<std::unique_ptr<SimDevice>> sims_;
  std::vector<std::string> notes_;
  std::vector<Entry> entries_;  // the CPU first
  std::vector<std::unique_ptr<ResidencyManager>> managers_;  // per entry; destroyed before the devices
  mutable std::mutex arenas_mu_;  // guards arenas_
  // Per entry, made by arena(); residents of the managers: destroyed before them.
  mutable std::vector<std::unique_ptr<ResidentArena>> arenas_;
};

}  // namespace kiln
