// HostNetwork: what the diffusion networks (the CLIP text encoder, the UNet, TAESD's decoder) share
// to run a graph on kiln's runtime: the backend of a host device, the compute arena (the caller's,
// shared with the device's other users, or one of its own) and one pass: plan the graph in the
// arena, bind host inputs, run it, download its output.
//
// Devices: host devices only for now (the networks' graphs read their weights in place in the
// file's memory). Ownership: the Backend and a shared arena must outlive it. Thread-safety: none;
// one pass at a time.
#pragma once

#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/result.h"
#include "runtime/backend.h"
#include "runtime/graph.h"
#include "runtime/planner.h"

namespace kiln::diffusion {

class HostNetwork {
 public:
  // `name` names the network in errors ("sd unet"). An Error for a backend that is not on a host
  // device, or an arena on another device than the backend's.
  static Result<HostNetwork> create(std::string name, Backend& backend, ComputeArena* arena);

  // A graph input and the host memory holding it (its type and shape, contiguous).
  struct Input {
    Tensor tensor;
    void* data = nullptr;
  };
  // Plans `g` (status ok, `out` marked as an output, an F32 tensor) in the arena, binds `inputs` (every
  // input of `g`), runs it and returns `out`'s floats.
  Result<std::vector<float>> run(const Graph& g, std::span<const Input> inputs, Tensor out);

  const std::string& name() const { return name_; }

 private:
  HostNetwork() = default;
  std::string name_;
  Backend* backend_ = nullptr;
  ComputeArena* arena_ = nullptr;
  std::unique_ptr<ComputeArena> own_arena_;
};

}  // namespace kiln::diffusion
