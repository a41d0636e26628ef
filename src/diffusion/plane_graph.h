// The diffusion networks' graphs over stable-diffusion.cpp's tensors: latents and images are [w, h, c]
// planes (each channel's rows of pixels) on the host, while kiln's layers (models/sd/sd_layers.h)
// work on channel-innermost grids [c, w, h, b]. run_on_planes builds the input, the permute into the
// grid, the network's body, and the permute back, and runs it on a DeviceNetwork; planes_graph_bytes
// says what compute arena that graph needs, running nothing.
// Thread-safety: as the DeviceNetwork's (none).
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "core/result.h"
#include "diffusion/device_network.h"
#include "runtime/graph.h"

namespace kiln::diffusion {

// The largest side of a grid run_on_planes takes.
inline constexpr int64_t kMaxPlaneSide = 8192;

// The network's body: the input grid F32 [channels, width, height, 1] -> its output grid F32
// [c', w', h', 1].
using GridBody = std::function<Tensor(Graph& g, Tensor grid)>;

// planes: `channels` planes of width * height floats. Returns the body's output as c' planes of
// w' * h' floats. Errors (naming net.name()): a side outside [1, kMaxPlaneSide], a size that does
// not match, the network's.
Result<std::vector<float>> run_on_planes(DeviceNetwork& net, std::span<const float> planes, int64_t width,
                                         int64_t height, int64_t channels, const GridBody& body);

// The compute arena bytes of run_on_planes' graph for a width x height input (the planner's
// placement at its default alignment). Errors: a side outside [1, kMaxPlaneSide], the graph's.
Result<size_t> planes_graph_bytes(int64_t width, int64_t height, int64_t channels, const GridBody& body);

}  // namespace kiln::diffusion
