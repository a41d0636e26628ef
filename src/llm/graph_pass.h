// One run of a graph whose weights are a file's tensors placed on a device (DeviceWeights of a
// GgufFile, llm/device_weights.h) and whose inputs are host bytes: what the mmproj encoders
// (llm/media_encoder.h) and the diffusion networks (diffusion/device_network.h) share.
//
// The graph's weights are external leaves named after their GGUF tensors (weight_tensor,
// models/clip/vit.h) over the file's mapping; place_weights points them at the tensors' placement
// on the device. The inputs are uploaded into one input buffer on the device (a resident of the
// network's owner, llm/encoder_memory.h), each at an aligned offset.
//
// Thread-safety: the callers hold the network's pin, the arena owner's pin (pin_arena) and the
// arena's turn around place_weights and run_pass (eviction moves the placements and frees the
// input buffer and the arena).
#pragma once

#include <cstddef>
#include <span>
#include <string>
#include <vector>

#include "core/result.h"
#include "llm/device_weights.h"
#include "runtime/backend.h"
#include "runtime/graph.h"
#include "runtime/planner.h"
#include "runtime/residency.h"

namespace kiln {

// A graph input and the host bytes it takes (its whole view, contiguous). Non-owning: the bytes
// must outlive the pass.
struct PassInput {
  Tensor tensor;
  const void* host = nullptr;
};

// Bytes of `inputs`' views in `g`, each aligned, as run_pass lays them out in the input buffer.
size_t pass_input_bytes(const Graph& g, std::span<const PassInput> inputs);

// Points every external leaf of `g` at the tensor of that name in `weights`, in its layout there.
// An Error (naming `what`) for a leaf that is not one of the placed tensors or has another size.
Status place_weights(Graph& g, const DeviceWeights& weights, const std::string& what);

// The external leaves of `g` that only mul_mat reads as weights (their placement may take a
// kernel layout, DeviceWeights::create's `matmul`).
std::vector<std::string> matmul_weights(const Graph& g);

// Keeps `arena`'s own owner on its device (restoring its buffer first): an empty pin for an arena
// that is not a resident or a device without a residency manager.
Result<ResidencyManager::Pin> pin_arena(const ComputeArena& arena);

// Plans `g` (weights placed) in `arena` (reserving it and allocating again when `g` needs more),
// prepares it on `backend`, uploads `inputs` into `input_buffer` (at least pass_input_bytes) and
// runs it to completion. The plan's views of outputs hold until the arena's next plan.
Result<ExecPlan> run_pass(const Graph& g, std::span<const PassInput> inputs, Buffer& input_buffer,
                          ComputeArena& arena, Backend& backend);

}  // namespace kiln
