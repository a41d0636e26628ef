// What a text model and its context take on each device before anything is allocated, and --fit:
// the placement (-ngl, -ts, the context size) that keeps every device within its room.
//
// Estimate (estimate_placement): per device of a LayerSplit, the weights as DeviceWeights lays them
// out (DeviceWeights::footprint: prepared layouts, alignment, on the host the mapped pages read in
// place), the K and V of the layers there (KvCache::bytes_for), and compute: the inputs buffer,
// the compute arena and the backend's scratch of the worst-case step, cut over the devices as a
// context cuts it (SplitPlan::measure over the real graph with stand-in addresses). This is what
// Context::create and DeviceWeights::create then allocate (a test holds it within 5%).
//
// Fit (fit_placement), llama.cpp's --fit rules for what kiln has (common/fit.cpp): when the whole
// model and its context fit the main device's room (device_room) nothing changes. Otherwise layers are given to the offload devices from the back
// (the last device takes the output layer), each device as many whole layers as fit its room, the
// rest stays on the CPU (-ngl and -ts are chosen so: llama.cpp's split then gives each device
// exactly that count); then, when the CPU's room cannot take the rest and the user did not set -c,
// the context shrinks (halving, never below --fit-ctx) and the layers are fitted again. When
// nothing fits the Error names each device's room and what it would take.
// Thread-safety: pure functions (over devices whose memory figures may change meanwhile).
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "core/result.h"
#include "llm/context.h"
#include "llm/device_weights.h"
#include "llm/layer_split.h"
#include "llm/model.h"

namespace kiln {

struct DeviceEstimate {
  Device* device = nullptr;
  size_t weights = 0;  // DeviceWeights::footprint total
  size_t kv = 0;
  size_t compute = 0;  // inputs buffer + arena + backend scratch
  // Segmented execution: the layers per segment of the device's share (0: held whole) and the
  // most it then holds at once (what stays there and two segments: segmented_peak).
  int64_t segment_layers = 0;
  size_t segmented_peak = 0;
  size_t total() const { return weights + kv + compute; }
};

// Estimates for `model` placed as `split` with a context of `options` (resolved as Context::create
// resolves them), one per device the split uses (LayerSplit::devices_used order). `cache` (may be
// null) keeps the weight layouts chosen across calls.
Result<std::vector<DeviceEstimate>> estimate_placement(const Model& model, const LayerSplit& split,
                                                       const ContextOptions& options, const WeightOptions& weights,
                                                       DeviceWeights::LayoutCache* cache);

struct FitOptions {
  // Room kept free per offload device (-fitt MiB,...; one value: every device), and on the CPU the
  // last value; empty: each device's default_fit_target() (1 GiB, as llama.cpp; none on sim).
  std::vector<size_t> targets;
  int64_t min_ctx = 4096;  // -fitc: the smallest context fit may choose
  bool ctx_set = false;    // the user gave -c: fit keeps it
  bool in_turns = false;   // the offload devices are taken in turns (--arbiter): see device_room
};

struct FitChoice {
  bool split = false;          // false: the whole model on the main device, as without fit
  SplitOptions options;        // with split: -ngl and -ts chosen (the offload devices as given)
  int64_t n_ctx = 0;           // the context size chosen (the one given when unchanged)
  std::vector<DeviceEstimate> estimate;  // of the choice
  std::string summary;         // one or two lines: what was chosen and why
};

// The fit target of device i (the offload devices, then the CPU): the -fitt value given for it (the
// last one for those after), else the device's default_fit_target().
size_t fit_target(const FitOptions& fit, size_t i, const Device& device);

// The room on `device` for a model: its --max-mem budget when it has one (the residency manager
// evicts other owners to make room within it; the budget is the user's margin, no target is
// taken off); else, for a device taken in turns with other processes (--arbiter: they yield all
// of it), its total less `target`; else its free memory plus what its residency manager counts
// (evictable) less `target` (-fitt, or Device::default_fit_target: what drivers and other
// processes may still take).
size_t device_room(const Device& device, size_t target, bool in_turns);

// Fits `model` on `offload` (the --device devices that are not the CPU; the first is the main one)
// and `cpu` as the header says. `options` is the context the user asked for (n_ctx 0: the
// default).
Result<FitChoice> fit_placement(const Model& model, const std::vector<Device*>& offload, Device& cpu,
                                const ContextOptions& options, const WeightOptions& weights, const FitOptions& fit);

// Segmented execution (--segmented, llm/context.h): how many consecutive layers each segment on
// `device` holds so that what stays there (its other weights, the K and V of its layers, compute)
// and two segments (the one computing and the one prefetched) fit `room`: the most that do, at
// most half the device's layers (two segments at least). 0 when the device's whole share fits
// `room` (nothing to stream). An Error naming the sizes when one layer per segment does not fit.
Result<int64_t> fit_segment_layers(const Model& model, const LayerSplit& split, Device& device,
                                   const ContextOptions& options, const WeightOptions& weights, size_t room);

// The most `device` holds at once when its share (estimate `here`, from estimate_placement over
// `split`) streams in segments of `per` layers: what stays there (its other weights, the K and V
// of its layers, compute) and its two largest segments. `cache` as estimate_placement's.
size_t segmented_peak(const Model& model, const LayerSplit& split, const DeviceEstimate& here, int64_t per,
                      const WeightOptions& weights, DeviceWeights::LayoutCache* cache);

// Lines for -fitp: each device's estimate (weights, KV, compute, total) against its room, and for
// a device that streams, its segments and the most it holds at once.
std::string describe_estimate(const std::vector<DeviceEstimate>& estimate);

}  // namespace kiln
