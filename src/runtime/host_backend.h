// HostKernelBackend: a Backend that computes with the host kernels of src/ops on the persistent
// ThreadPool, over memory of any Device that can translate its addresses to host addresses
// (Device::host_address). The CPU backend (host memory) and the sim backend (a pool that is not
// host-visible to callers) are this one engine over two devices.
#pragma once

#include <memory>

#include "runtime/backend.h"
#include "runtime/residency.h"
#include "runtime/thread_pool.h"

namespace kiln {

// The kernel scratch is a buffer on the device; where the device has a residency manager it is a
// resident of the backend's own owner, counted in the budget and never evicted (a plan prepared
// on one thread must find it at execute()).
class HostKernelBackend : public Backend, private Evictable {
 public:
  // Non-owning: the device and the pool must outlive the backend. The pool may be shared by
  // several backends (runs are serialized by the pool).
  HostKernelBackend(Device& device, ThreadPool& pool);

  Device& device() const override { return *device_; }
  ThreadPool& pool() const { return *pool_; }
  bool supports_op(const OpCall& call) const override { return kernel_supported(call); }
  Status prepare(const ExecPlan& plan) override;
  Status execute(ExecPlan& plan) override;
  void synchronize() override {}
  void release_scratch() override { scratch_.reset(); }
  size_t scratch_bytes() const override { return scratch_ ? scratch_->size() : 0; }
  void set_scratch_owner_name(std::string name) override;

 private:
  // Evictable: the manager never evicts scratch (MemoryKind::Scratch); these refuse and accept.
  Status evict() override;
  Status restore() override { return ok_status(); }

  Device* device_;
  ThreadPool* pool_;
  std::string scratch_name_;   // the scratch's owner in the memory breakdown
  Resident scratch_resident_;  // before scratch_: outlives it
  std::unique_ptr<Buffer> scratch_;
};

}  // namespace kiln
