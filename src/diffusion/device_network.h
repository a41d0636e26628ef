// DeviceNetwork: what the diffusion networks (the CLIP text encoder, the UNet, TAESD's decoder; the
// VAE the same way) share to run on kiln's runtime as a resident of a device: the network's tensors
// of a model file placed on the backend's device under an owner of its own (`name`: "sd unet"),
// with an input buffer beside them (llm/encoder_memory.h), a compute arena (the device's, shared
// with everything else computing there, or one of its own), and one pass: place the graph's weights,
// plan it in the arena, upload the host inputs, run it, download its output.
//
// Memory: on a host device plain tensors are read in place in the file's memory (the mapping, or
// the image a safetensors file was packed into; WeightOptions::copy_all copies them); on another
// device (sim, Vulkan) every tensor is copied into a device buffer. With a residency manager the
// weights and the input buffer are residents of the owner: a pass pins it (restoring them, the
// same bytes, when they were evicted) and the arena's owner, so on a budget the manager evicts the
// networks that are not computing, least recently used first: the text encoder once the prompt is
// encoded, the UNet after the steps, and brings each back when it computes again.
//
// Ownership: shares the file; the Backend (and a shared arena) must outlive the network.
// Thread-safety: none; one pass at a time (the pass holds the shared arena's turn).
#pragma once

#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/gguf.h"
#include "core/result.h"
#include "llm/device_weights.h"
#include "llm/encoder_memory.h"
#include "llm/graph_pass.h"
#include "models/sd/weight_file.h"
#include "runtime/backend.h"
#include "runtime/graph.h"
#include "runtime/planner.h"

namespace kiln::diffusion {

// Where a network is placed: the backend of its device, the device's shared compute arena (null:
// the network's own) and how its weights are held there (--no-mmap, --mlock, prepare threads).
struct NetworkPlacement {
  Backend* backend = nullptr;
  ComputeArena* arena = nullptr;
  WeightOptions weights = {};
};

class DeviceNetwork {
 public:
  // Places the tensors of `file` whose names start with one of `name_prefixes` ("model.diffusion_model.")
  // on the placement's device under the owner `name` (also the network's name in errors). An Error
  // for an arena on another device than the backend's, or the manager's numbers when the tensors
  // do not fit.
  static Result<std::unique_ptr<DeviceNetwork>> create(std::string name,
                                                       std::shared_ptr<const sd::SdWeightFile> file,
                                                       std::vector<std::string> name_prefixes,
                                                       const NetworkPlacement& placement);

  // Runs `g` (status ok, its weights external leaves over `file` named after their tensors, every
  // input of `g` in `inputs`, `out` marked as an output, an F32 tensor) and returns `out`'s floats.
  Result<std::vector<float>> run(Graph& g, std::span<const PassInput> inputs, Tensor out);

  const std::string& name() const { return name_; }

 private:
  DeviceNetwork() = default;
  std::string name_;
  Backend* backend_ = nullptr;
  ComputeArena* arena_ = nullptr;
  std::unique_ptr<ComputeArena> own_arena_;
  std::unique_ptr<EncoderMemory> memory_;  // weights and input buffer
};

// A network's bound weights (views into its file, which `net` keeps alive) and its placement.
template <class Weights>
struct BoundNetwork {
  Weights weights;
  std::unique_ptr<DeviceNetwork> net;
};

// Binds a network with `bind` (its tensors under `prefix` in `file`) and places the tensors whose
// names start with one of `name_prefixes` on the placement's device under the owner `name`.
// Errors: bind's, then DeviceNetwork::create's.
template <class Weights>
Result<BoundNetwork<Weights>> bind_network(std::string name, std::shared_ptr<const sd::SdWeightFile> file,
                                           Result<Weights> (*bind)(const GgufFile&, const std::string&),
                                           const std::string& prefix, std::vector<std::string> name_prefixes,
                                           const NetworkPlacement& placement) {
  BoundNetwork<Weights> b;
  KILN_ASSIGN_OR_RETURN(b.weights, bind(file->gguf(), prefix));
  KILN_ASSIGN_OR_RETURN(
      b.net, DeviceNetwork::create(std::move(name), std::move(file), std::move(name_prefixes), placement));
  return b;
}

}  // namespace kiln::diffusion
