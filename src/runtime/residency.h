// Residency: every big allocation of a device (weights, KV caches, compute memory) is a resident of
// that device's ResidencyManager, which keeps them within a budget by evicting and restoring them.
//
// A resident belongs to an owner (OwnerId: one per model placed on a device, shared by that
// model's contexts there), has a kind, the bytes it holds now, and a way back (Evictable): weights
// are prepared again from the mapped file, a KV cache is copied back from a host copy or, with a
// swap directory (--swap-dir, runtime/swap_file.h), read back from a file there, compute
// memory is allocated again (contexts plan every graph anew, so nothing keeps an old address).
// Each restore raises the resident's generation: code that captured a resident's device addresses
// compares generations and rebuilds what it captured.
//
// The manager counts, per device: the buffers allocated through Resident::allocate (rounded up to
// the device's alignment, as pools place them) and the external bytes residents declare (mapped
// weight pages on the host), while they are resident. Allocating asks for room first: when the
// budget or what the device can give now (Device::largest_free_block: a pool's largest free block,
// the host's available memory) cannot take the request, the manager evicts unpinned residents of
// other owners, least recently used first, until it fits; when nothing more can be evicted it
// refuses with the numbers (in GiB). Separate holes never count as room. Without a budget the
// device's own limit is the only one: a host allocation larger than the memory available is
// refused rather than left to the kernel's overcommit. Mapped pages are checked against the budget
// only (the kernel pages a mapping in and out; it may be larger than the memory). admit() asks for
// room for several allocations at once, before the first (a context's KV cache and inputs).
// Owners are pinned (pin()) for the length of a request: a pinned owner's residents are never
// evicted. pin() first restores the owner's evicted residents (weights, then KV, then compute), so
// the peak stays within the budget: each restore asks for its room before it allocates.
// Never evicted: backend scratch (a plan prepared on one thread must find it at execute), and on a
// host device without a swap directory a KV cache (its copy would stay in host RAM, so evicting it
// would free nothing). Both are counted. With a swap directory a host KV cache is evictable: its
// bytes go to a file there and are no longer counted.
//
// Devices without a manager (device.residency() null) allocate directly: a Resident over such a
// device is a plain pass-through (unmanaged), so code works the same with and without a manager.
//
// Thread-safety: the manager is thread-safe (one recursive mutex: Evictable hooks run under it and
// allocate through it). Evictable hooks must not take a lock that their owner may hold while it
// calls into the manager (a context's mutex): they touch only the resident's own memory.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "core/result.h"
#include "runtime/device.h"
#include "runtime/memory_breakdown.h"

namespace kiln {

using OwnerId = uint64_t;
// A new process-wide unique owner id (> 0).
OwnerId new_owner_id();

// How a resident's memory leaves the device and comes back; implemented by what holds the memory.
class Evictable {
 public:
  // Frees the resident's device memory (every Buffer from Resident::allocate), keeping what
  // restore() needs. Never called while the owner is pinned.
  virtual Status evict() = 0;
  // Allocates the memory again through Resident::allocate and puts the same bytes back. On an
  // Error it leaves nothing allocated.
  virtual Status restore() = 0;

 protected:
  ~Evictable() = default;
};

class ResidencyManager;

// A registration with the device's manager (or an unmanaged pass-through). Not copyable or
// movable: the manager keeps its address-free id, the holder keeps it beside its buffers; declare
// it before the buffers it allocates so that it outlives them.
class Resident {
 public:
  Resident() = default;
  ~Resident();
  Resident(const Resident&) = delete;
  Resident& operator=(const Resident&) = delete;

  // Registers a resident of `owner` on `device` when the device has a manager. `restore_how`
  // says how it comes back ("re-prepared from the mapped file"); `hooks` must outlive this.
  void attach(Device& device, OwnerId owner, std::string owner_name, MemoryKind kind, std::string restore_how,
              Evictable* hooks);
  bool managed() const { return manager_ != nullptr; }
  // A buffer for this resident: the manager makes room first and counts it while it lives.
  // Unmanaged: device.allocate(desc).
  Result<std::unique_ptr<Buffer>> allocate(const BufferDesc& desc);
  // Declares `bytes` of memory this resident holds outside Buffers (mapped file pages) while
  // resident; the manager makes room for them first. Unmanaged: nothing to do.
  Status set_external_bytes(size_t bytes);
  // 0, then +1 at every restore (always 0 unmanaged).
  uint64_t generation() const;
  // The manager's swap directory, where an evicted KV cache keeps its bytes (empty: none, or
  // unmanaged; the copy then stays in host memory).
  const std::string& swap_dir() const;
  // The owner given to attach() (0 before).
  OwnerId owner() const { return owner_; }
  // The name the memory breakdown gives this resident's owner from now on (attached).
  void rename_owner(std::string owner_name);

 private:
  Device* device_ = nullptr;
  ResidencyManager* manager_ = nullptr;
  uint64_t id_ = 0;
  OwnerId owner_ = 0;
};

class ResidencyManager {
 public:
  // Attaches to `device` (device.residency() returns this) until destroyed. Every resident must
  // be gone before the manager. budget: bytes, kNoBudget for none. swap_dir: where evicted KV
  // caches keep their bytes (checked by the caller: check_swap_dir); empty: in host memory.
  ResidencyManager(Device& device, size_t budget, std::string swap_dir = {});
  ~ResidencyManager();
  ResidencyManager(const ResidencyManager&) = delete;
  ResidencyManager& operator=(const ResidencyManager&) = delete;

  Device& device() const { return *device_; }
  size_t budget() const { return budget_; }
  const std::string& swap_dir() const { return swap_dir_; }
  size_t used() const;  // bytes counted now

  // Keeps an owner's residents on the device while it lives (movable; empty when default-made).
  class Pin {
   public:
    Pin() = default;
    Pin(Pin&& o) noexcept : manager_(o.manager_), owner_(o.owner_) { o.manager_ = nullptr; }
    Pin& operator=(Pin&& o) noexcept;
    ~Pin() { reset(); }
    void reset();
    bool held() const { return manager_ != nullptr; }

   private:
    friend class ResidencyManager;
    Pin(ResidencyManager* m, OwnerId owner) : manager_(m), owner_(owner) {}
    ResidencyManager* manager_ = nullptr;
    OwnerId owner_ = 0;
  };
  // Restores every evicted resident of `owner` (weights, KV, compute), pins the owner and marks
  // its residents used now. An Error with the numbers when there is no room even after evicting
  // every unpinned resident of other owners; the owner is then not pinned.
  Result<Pin> pin(OwnerId owner);
  // Evicts every resident of `owner` that can be (not a host KV cache without a swap directory);
  // an Error when the owner is pinned, or with the hook's reason when one cannot leave (a swap
  // file that cannot be written): that resident and those not yet reached stay resident.
  Status evict_owner(OwnerId owner);
  // Whether every resident of `owner` is on the device.
  bool owner_resident(OwnerId owner) const;
  // Admission: makes room for `bytes` that `owner` is about to allocate (in one or more buffers),
  // as each allocation does, evicting other owners' unpinned residents if need be; allocates
  // nothing. An Error with the numbers, naming `what` ("'llama' (a context of 4096 tokens: ...)"),
  // when there is no room, so that a caller refuses before it allocates anything.
  Status admit(OwnerId owner, size_t bytes, const std::string& what);

  // Whether `bytes` of device memory could be allocated now without evicting anything: within the
  // budget and what the device can give (Device::largest_free_block).
  bool fits(size_t bytes) const;

  DeviceMemoryBreakdown breakdown() const;

 private:
  friend class Resident;
  friend class ManagedBuffer;
  struct Entry {
    uint64_t id;
    OwnerId owner;
    std::string owner_name;
    MemoryKind kind;
    std::string restore_how;
    Evictable* hooks;
    size_t buffer_bytes = 0;    // counted bytes of live buffers
    size_t requested_bytes = 0; // their bytes as requested (Device::allocated_bytes counts these)
    size_t external_bytes = 0;  // declared bytes outside buffers (counted while resident)
    bool resident = true;
    bool evictable = true;
    uint64_t generation = 0;
    uint64_t last_use = 0;
  };

  uint64_t add(OwnerId owner, std::string owner_name, MemoryKind kind, std::string restore_how, Evictable* hooks);
  void remove(uint64_t id);
  void rename(uint64_t id, std::string owner_name);
  Result<std::unique_ptr<Buffer>> allocate(uint64_t id, const BufferDesc& desc);
  Status set_external_bytes(uint64_t id, size_t bytes);
  uint64_t generation(uint64_t id) const;
  void note_freed(uint64_t id, size_t counted, size_t requested);
  void unpin(OwnerId owner);

  // Under mu_:
  Entry* find(uint64_t id);
  size_t counted_size(size_t bytes) const;  // bytes as the device places them
  bool pinned(OwnerId owner) const;
  Entry* lru_victim(OwnerId requester);
  // Room for `bytes` of `requester`: within the budget and, for memory the device allocates
  // (device_memory; not mapped pages), within what it can give now; evicts until it fits.
  Status make_room(OwnerId requester, size_t bytes, const std::string& what, bool device_memory);
  // The refusal of make_room: `need` counted bytes do not fit.
  Error no_room(OwnerId requester, size_t need, const std::string& what, std::optional<size_t> device_room) const;
  Status evict(Entry& e);
  Status restore(Entry& e);

  Device* device_;
  size_t budget_;
  std::string swap_dir_;
  mutable std::recursive_mutex mu_;
  std::vector<std::unique_ptr<Entry>> entries_;  // stable addresses: hooks run while one is in use
  std::vector<std::pair<OwnerId, int>> pins_;  // owners with a pin count > 0
  uint64_t next_id_ = 1, clock_ = 0;
  size_t used_ = 0;
};

}  // namespace kiln
