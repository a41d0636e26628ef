// Where a text model goes, from llama.cpp's placement flags as the commands and the server take
// them by device name (--device A,B, -ngl, -sm, -ts, -mg, -ot, --fit, -fitt, -fitc): the whole
// model on the main device (the first --device one, the token embedding included), or split over
// several (llm/layer_split.h) as the flags say, or as --fit chooses (llm/placement_fit.h) when the
// flags leave it open and the whole model does not fit.
// Thread-safety: pure functions over the registry's devices.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "backends/device_registry.h"
#include "core/result.h"
#include "llm/context.h"
#include "llm/device_weights.h"
#include "llm/layer_split.h"
#include "llm/model.h"
#include "llm/placement_fit.h"

namespace kiln {

// The flags by device name.
struct SplitFlags {
  std::vector<std::string> devices = {};  // --device A,B,...: every device named, in order
  int64_t n_gpu_layers = SplitOptions::kAllLayers;  // -ngl
  SplitMode mode = SplitMode::Layer;                // -sm
  std::vector<float> tensor_split = {};             // -ts
  int32_t main_gpu = 0;                             // -mg
  std::vector<std::pair<std::string, std::string>> overrides = {};  // -ot PATTERN=DEVICE
  bool no_kv_offload = false;                       // -nkvo: every layer's K and V on the CPU
  bool fit = true;                                  // -fit
  std::vector<size_t> fit_targets = {};             // -fitt, bytes
  int64_t fit_min_ctx = 4096;                       // -fitc
  bool devices_in_turns = false;  // the devices are taken in turns with other processes (--arbiter)
  // --segmented: each offload device streams its layers through its room in segments
  // (llm/context.h) instead of holding them; fit leaves the layers where the flags put them.
  bool segmented = false;
  // Whether the flags split the model themselves (several devices, -ngl short of all, -ot, -nkvo:
  // the CPU then holds the input layer and the K/V):
  // then --fit leaves it as they say.
  bool splits() const {
    return devices.size() > 1 || n_gpu_layers != SplitOptions::kAllLayers || !overrides.empty() || no_kv_offload;
  }
};

// The placement chosen: the whole model on the main device, or `split`; the context (its n_ctx
// as fit chose) and fit's line (empty when fit changed nothing).
struct PlacementPlan {
  bool whole = true;
  SplitOptions split;
  SegmentLayers segments;  // segmented execution: the layers per segment on the devices that stream
  ContextOptions context;
  std::string fit_summary;
};

// The flags' split with their devices found in `devices` (the named devices that are not the CPU
// are the offload devices; with none named, `main`).
Result<SplitOptions> resolve_split(const SplitFlags& flags, const std::string& main, const DeviceRegistry& devices);

// The placement for `model` with a context of `options` (ctx_given: the user set its size, which fit
// keeps). With --segmented, or as fit's last resort when no placement of whole layers fits, the
// offload devices whose share does not fit their room stream it in segments (fit_segment_layers).
Result<PlacementPlan> plan_placement(const SplitFlags& flags, const std::string& main, const DeviceRegistry& devices,
                                     const Model& model, const ContextOptions& options, const WeightOptions& weights,
                                     bool ctx_given);

struct PlacedModel {
  // Every device's weights, the main device's first; one entry: the model is not split.
  std::vector<std::shared_ptr<DeviceWeights>> weights;
  std::string layers;  // a split's "layers 0-10 on cpu; ..." (LayerSplit::describe), else empty
};

// Places `model` as `plan` says (`main`: the whole model's device).
Result<PlacedModel> place_model(std::shared_ptr<const Model> model, const PlacementPlan& plan, const std::string& main,
                                const DeviceRegistry& devices, const WeightOptions& weights);

// The backend a context computes with on a device (e.g. one of the caller's own: the server's
// models compute at the same time, each with its own kernel scratch). Empty: the registry's.
using BackendOf = std::function<Backend&(Device&)>;

// A context with `options` over `placed` (place_model's weights, the main device's first): on one
// device Context::create over its weights, else one ContextDevice per device. Each device computes
// on backend_of(device) and plans in the registry's compute arena of its device.
Result<std::unique_ptr<Context>> create_placed_context(const std::vector<std::shared_ptr<DeviceWeights>>& placed,
                                                       const DeviceRegistry& devices, ContextOptions options,
                                                       const BackendOf& backend_of = {});

// The device the mmproj's encoders run on: `name` (-mmdev; "cpu" for --no-mmproj-offload) or,
// when it is empty, the model's main device `model_main`. Errors name --mmproj-device.
Result<Device*> encoder_device(const DeviceRegistry& devices, const std::string& name, Device& model_main);

// The draft model's own placement flags (-devd, -ngld, -otd).
struct DraftPlacementFlags {
  std::vector<std::string> devices = {};            // -devd: empty follows the target's --device
  int64_t n_gpu_layers = SplitOptions::kAllLayers;  // -ngld (auto)
  std::vector<std::pair<std::string, std::string>> overrides = {};  // -otd
};

// The flags a draft model is placed with, as llama.cpp derives them
// (common_base_params_to_speculative): the target's, with -devd's devices when given, -ngld's layer
// count and -otd's overrides (the target's -ot is not inherited). `*main` gets the draft's main
// device (-devd's first, else the target's `target_main`).
SplitFlags draft_split_flags(const SplitFlags& target, const std::string& target_main,
                             const DraftPlacementFlags& draft, std::string* main);

// A draft model's context: plans (fit sees the room the target left), places and creates it with
// `options` and the target's weight options, computing on backend_of's backends. `log` (may be
// empty) gets fit's and the split's lines.
Result<std::unique_ptr<Context>> place_draft_context(std::shared_ptr<const Model> draft, const SplitFlags& target,
                                                     const std::string& target_main,
                                                     const DraftPlacementFlags& flags,
                                                     const DeviceRegistry& devices, const ContextOptions& options,
                                                     const WeightOptions& weights, const BackendOf& backend_of,
                                                     const std::function<void(const std::string&)>& log);

// The estimate of `plan` (the whole model as an override of every tensor to `main`), for -fitp;
// a device that streams its layers (plan.segments) gets its segments and their peak.
Result<std::vector<DeviceEstimate>> estimate_plan(const Model& model, const PlacementPlan& plan, const std::string& main,
                                                  const DeviceRegistry& devices, const WeightOptions& weights);

// Parsers of the flags' values, as llama.cpp spells them; each returns "" or the message naming the
// value.
// A device name: cpu (or none, CPU), vulkanN (or VulkanN), simN; `out` gets kiln's spelling.
std::string parse_one_device(const std::string& v, std::string* out);
// --device A[,B...]: `main` gets the first, `all` every one in order (each once).
std::string parse_device_list(const std::string& v, std::string* main, std::vector<std::string>* all);
// -ngl N|auto|all (auto and all: SplitOptions::kAllLayers; --fit then decides).
std::string parse_gpu_layers(const std::string& v, int64_t* out);
// -sm none|layer (row and tensor are refused with the reason).
std::string parse_split_mode(const std::string& v, SplitMode* out);
// -ts A,B,... (or A/B/...): shares >= 0.
std::string parse_tensor_split(const std::string& v, std::vector<float>* out);
// -ot PATTERN=DEVICE[,PATTERN=DEVICE...], appended to `out`.
std::string parse_overrides(const std::string& v, std::vector<std::pair<std::string, std::string>>* out);
// -fitt MiB[,MiB...] (or with '/'), in bytes.
std::string parse_fit_targets(const std::string& v, std::vector<size_t>* out);

}  // namespace kiln
