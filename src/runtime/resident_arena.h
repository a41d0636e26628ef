// ResidentArena: a ComputeArena shared by several users that take turns in it (the contexts,
// vision encoders and draft models of every model on a device: DeviceRegistry::arena) and that is
// a resident of an owner of its own: its buffer is counted once against the device's budget,
// released when the manager evicts that owner (least recently used, or idle sleep) and allocated
// again when the owner is pinned (or at the next plan; plans are made anew for every graph, so
// nothing keeps the old address).
//
// Users pin the owner (arena().resident_owner()) while they compute in the arena, then take its
// turn (pin before turn, everywhere): a Context pins it beside its weights' owner, the vision
// encoder before it takes the turn, a server of many models for a whole request; so it is never
// evicted under a running graph.
// Ownership: holds the arena; `device` must outlive it. Thread-safety: as ComputeArena (users
// take turns by its lock); the eviction hooks run under the residency manager's lock and touch
// only the arena's buffer (no user touches it unpinned).
#pragma once

#include <string>

#include "runtime/planner.h"
#include "runtime/residency.h"

namespace kiln {

class ResidentArena final : private Evictable {
 public:
  ResidentArena(Device& device, OwnerId owner, const std::string& owner_name)
      : arena_(device, owner_name, &resident_) {
    resident_.attach(device, owner, owner_name, MemoryKind::Compute, "re-planned", this);
  }
  ResidentArena(const ResidentArena&) = delete;
  ResidentArena& operator=(const ResidentArena&) = delete;

  ComputeArena& arena() { return arena_; }

 private:
  Status evict() override {
    arena_.release();
    return ok_status();
  }
  Status restore() override { return arena_.allocate(); }

  Resident resident_;   // declared before the arena: outlives its buffer
  ComputeArena arena_;
};

}  // namespace kiln
