// LayerSplit: which device each weight of a text model lives on when the model is split over
// several devices, by llama.cpp's rules (llama_model::load_tensors) and flags:
//   -ngl N   the last N of the n_layer + 1 layers (the output layer counts as one) go to the
//            offload devices, the rest stay on the CPU; the input layer (the token embedding)
//            always stays on the CPU ("there is very little benefit to offloading it").
//   -sm none every offloaded layer on the main device (-mg); -sm layer: spread over the offload
//            devices in proportion to -ts (default: each device's free memory), in device order:
//            layer il goes to the first device whose cumulative share exceeds
//            (il - first offloaded) / offloaded.
//   -ot P=D  a tensor whose name matches regular expression P (std::regex_search, the first
//            override that matches) lives on device D whatever its layer says.
// A layer's K and V go where its K projection goes (Context::create), and the graph cut runs every
// node on the device of the weights it reads (runtime/graph_split.h).
// Thread-safety: immutable after make_layer_split().
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <regex>
#include <string>
#include <vector>

#include "core/result.h"
#include "llm/device_weights.h"
#include "llm/model.h"
#include "models/hparams.h"
#include "models/modules.h"
#include "runtime/device.h"

namespace kiln {

enum class SplitMode : uint8_t { None, Layer };

// -ot PATTERN=DEVICE, with the device found.
struct TensorOverride {
  std::string pattern;
  Device* device = nullptr;
};

struct SplitOptions {
  static constexpr int64_t kAllLayers = -1;
  std::vector<Device*> offload = {};  // the offload devices (not the CPU), in --device order
  int64_t n_gpu_layers = kAllLayers;  // -ngl; kAllLayers: every layer and the output
  SplitMode mode = SplitMode::Layer;  // -sm
  std::vector<float> tensor_split = {};  // -ts: a share per offload device; empty: by free memory
  int main_device = 0;                // -mg: index in `offload` (SplitMode::None)
  std::vector<TensorOverride> overrides = {};  // -ot, in the order given
};

class LayerSplit {
 public:
  // The placement of a model of `hp`'s layer count; `cpu` holds what is not offloaded. An Error
  // for a -ts with more shares than devices or no positive share, a -mg outside the devices, an
  // override pattern that is not a regular expression.
  static Result<LayerSplit> make(const HParams& hp, const SplitOptions& options, Device& cpu);

  // The device of tensor `name` of layer `layer` (models/modules.h: kInputLayer, 0..n_layer-1, or
  // n_layer for the output norm and head): an override's, else its layer's.
  Device* device_of(int64_t layer, const std::string& name) const;
  // The CPU (what is not offloaded).
  Device* host() const { return cpu_; }
  // The devices that hold some weight of `w` (the model's), offload devices in order, the CPU last.
  std::vector<Device*> devices_used(const DecoderWeights& w) const;
  // The layers (0..n_layer, the output one last) on `device` before overrides.
  int64_t layers_on(const Device& device) const;
  // "layers 11-21 and the output layer on sim0; layers 0-10 on cpu", for the load log.
  std::string describe(int64_t n_layer) const;

 private:
  std::vector<Device*> layer_device_;  // per layer 0..n_layer (the output layer last)
  Device* cpu_ = nullptr;
  std::vector<Device*> order_;  // offload devices then the CPU
  std::vector<std::pair<std::shared_ptr<const std::regex>, Device*>> overrides_;
};

// Segmented execution (llm/context.h): per device, how many consecutive layers each segment of its
// share holds; a device not listed holds its share whole.
using SegmentLayers = std::map<const Device*, int64_t>;

// The layers (0..n_layer-1) with some weight of `w` on `device`, in order, cut into runs of
// `layers_per_segment` (> 0): the segments of that device.
std::vector<std::vector<int64_t>> segment_layer_runs(const LayerSplit& split, const DecoderWeights& w,
                                                     const Device& device, int64_t layers_per_segment);

// Places `model` as `split` says: one DeviceWeights per device used (LayerSplit::devices_used, in
// that order), each holding the weights the split gives its device (WeightOptions::holds), all
// with `options` otherwise. A device in `segments` holds the layers of segment_layer_runs() in
// DeviceWeights of their own (DeviceWeights::segments of its share, which keeps the rest: the input
// and output layers' weights there). An Error (nothing left placed) when a device has no room.
Result<std::vector<std::shared_ptr<DeviceWeights>>> place_split(std::shared_ptr<const Model> model,
                                                                const LayerSplit& split,
                                                                const WeightOptions& options,
                                                                const SegmentLayers& segments = {});

}  // namespace kiln
