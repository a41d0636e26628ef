// Backend: executes planned graphs on one device.
//
// Lifecycle per graph: plan it in a ComputeArena on device() (runtime/planner.h), prepare() once
// (allocates the backend's kernel scratch), bind inputs, then execute() as often as needed;
// execute() allocates nothing. release_scratch() returns the scratch memory (for a residency
// manager under memory pressure); prepare() again before the next execute().
// Thread-safety: one execute() at a time per backend.
#pragma once

#include <string>

#include "core/result.h"
#include "ops/op.h"
#include "runtime/device.h"
#include "runtime/planner.h"

namespace kiln {

class Backend {
 public:
  virtual ~Backend() = default;

  virtual Device& device() const = 0;
  // Whether this backend can run `call`: types and shapes count; views need non-null data (any
  // placeholder address: nothing is read), as ops/op.h's checks require.
  virtual bool supports_op(const OpCall& call) const = 0;
  // Makes sure executing `plan` needs no allocation: allocates scratch for its largest kernel.
  virtual Status prepare(const ExecPlan& plan) = 0;
  // Runs every node of `plan` in order. An Error, before anything runs, when the plan's arena is
  // not on device() or too small, an input is unbound or not on device(), or prepare() is missing.
  virtual Status execute(ExecPlan& plan) = 0;
  // Waits until the work execute() queued has finished (host-computing backends finish inside
  // execute()).
  virtual void synchronize() = 0;
  // Frees the scratch memory; bytes held now.
  virtual void release_scratch() = 0;
  virtual size_t scratch_bytes() const = 0;
  // Names the owner of this backend's scratch in the device's memory breakdown (default: "DEVICE
  // scratch"), so that several backends on one device are told apart there. A backend without
  // scratch of its own ignores it.
  virtual void set_scratch_owner_name(std::string /*name*/) {}
};

}  // namespace kiln
