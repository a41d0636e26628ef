#include "llm/layer_split.h"

#include <algorithm>

namespace kiln {

Result<LayerSplit> LayerSplit::make(const HParams& hp, const SplitOptions& options, Device& cpu) {
  LayerSplit s;
  s.cpu_ = &cpu;
  const int64_t n_layer = hp.n_layer;
  const std::vector<Device*>& devs = options.offload;
  const auto n_dev = static_cast<int64_t>(devs.size());
  if (options.main_device < 0 || (n_dev > 0 && options.main_device >= n_dev))
    return make_error("-mg ", options.main_device, ": there are ", n_dev, " offload devices");
  if (static_cast<int64_t>(options.tensor_split.size()) > std::max<int64_t>(n_dev, 1))
    return make_error("-ts: ", options.tensor_split.size(), " shares for ", n_dev, " offload devices");
  // Cumulative shares, normalized (llama.cpp's split points).
  std::vector<float> splits(static_cast<size_t>(n_dev), 0.0f);
  const bool given = std::any_of(options.tensor_split.begin(), options.tensor_split.end(), [](float f) { return f > 0; });
  for (int64_t i = 0; i < n_dev; ++i) {
    const auto u = static_cast<size_t>(i);
    if (options.mode == SplitMode::None) {
      splits[u] = i == options.main_device ? 1.0f : 0.0f;
    } else if (given) {
      splits[u] = u < options.tensor_split.size() ? std::max(0.0f, options.tensor_split[u]) : 0.0f;
    } else {
      splits[u] = static_cast<float>(devs[u]->memory_info().free);
    }
  }
  if (!options.tensor_split.empty() && !given && options.mode == SplitMode::Layer)
    return make_error("-ts: no positive share");
  float sum = 0;
  for (float& f : splits) f = (sum += f);
  if (sum <= 0) std::fill(splits.begin(), splits.end(), 1.0f);  // no free memory reported: the first
  else
    for (float& f : splits) f /= sum;
  const int64_t ngl = options.n_gpu_layers < 0 ? n_layer + 1 : options.n_gpu_layers;
  const int64_t first = std::max<int64_t>(n_layer + 1 - ngl, 0);
  const int64_t offloaded = n_dev == 0 ? 0 : std::min(ngl, n_layer + 1);
  for (int64_t il = 0; il <= n_layer; ++il) {
    if (il < first || il - first >= offloaded) {
      s.layer_device_.push_back(&cpu);
      continue;
    }
    const float at = static_cast<float>(il - first) / static_cast<float>(offloaded);
    const auto d = std::upper_bound(splits.begin(), splits.end(), at) - splits.begin();
    s.layer_device_.push_back(devs[static_cast<size_t>(std::min<int64_t>(d, n_dev - 1))]);
  }
  for (const TensorOverride& o : options.overrides) {
    try {
      s.overrides_.emplace_back(std::make_shared<const std::regex>(o.pattern), o.device);
    } catch (const std::regex_error& e) {
      return make_error("-ot ", o.pattern, ": not a regular expression (", e.what(), ")");
    }
  }
  s.order_ = devs;
  s.order_.push_back(&cpu);
  return s;
}

Device* LayerSplit::device_of(int64_t layer, const std::string& name) const {
  for (const auto& [re, dev] : overrides_) {
    if (std::regex_search(name, *re)) return dev;
  }
  if (layer < 0) return cpu_;  // the input layer
  return layer_device_[static_cast<size_t>(std::min<int64_t>(layer, static_cast<int64_t>(layer_device_.size()) - 1))];
}

std::vector<Device*> LayerSplit::devices_used(const DecoderWeights& w) const {
  std::vector<bool> used(order_.size(), false);
  for_each_weight_slot(w, [&](const Weight& x, WeightUse, int64_t layer) {
    if (!x) return;
    Device* d = device_of(layer, x.info->name);
    for (size_t i = 0; i < order_.size(); ++i) used[i] = used[i] || order_[i] == d;
  });
  std::vector<Device*> out;
  for (size_t i = 0; i < order_.size(); ++i) {
    if (used[i]) out.push_back(order_[i]);
  }
  return out;
}

int64_t LayerSplit::layers_on(const Device& device) const {
  return std::count(layer_device_.begin(), layer_device_.end(), &device);
}

std::string LayerSplit::describe(int64_t n_layer) const {
  std::string out;
  for (Device* d : order_) {
    std::string ranges;
    int64_t blocks = 0;
    bool output = false;
    for (int64_t il = 0; il < n_layer; ++il) {
      if (layer_device_[static_cast<size_t>(il)] != d) continue;
      int64_t end = il;
      while (end + 1 < n_layer && layer_device_[static_cast<size_t>(end + 1)] == d) ++end;
      ranges += (ranges.empty() ? "" : ", ") + std::to_string(il) + (end > il ? "-" + std::to_string(end) : "");
      blocks += end - il + 1;
      il = end;
    }
    output = layer_device_[static_cast<size_t>(n_layer)] == d;
    if (blocks == 0 && !output) continue;
    std::string what = blocks == 0 ? "" : (blocks == 1 ? "layer " : "layers ") + ranges;
    if (output) what += blocks == 0 ? "the output layer" : " and the output layer";
    out += (out.empty() ? "" : "; ") + what + " on " + d->name();
  }
  if (!overrides_.empty()) out += " (and the tensors -ot names where it says)";
  return out;
}

std::vector<std::vector<int64_t>> segment_layer_runs(const LayerSplit& split, const DecoderWeights& w,
                                                     const Device& device, int64_t layers_per_segment) {
  std::vector<bool> on(w.blocks.size(), false);
  for_each_weight_slot(w, [&](const Weight& x, WeightUse, int64_t layer) {
    if (x && layer >= 0 && layer < static_cast<int64_t>(on.size()) && split.device_of(layer, x.info->name) == &device)
      on[static_cast<size_t>(layer)] = true;
  });
  std::vector<std::vector<int64_t>> runs;
  for (size_t il = 0; il < on.size(); ++il) {
    if (!on[il]) continue;
    if (runs.empty() || static_cast<int64_t>(runs.back().size()) == layers_per_segment) runs.emplace_back();
    runs.back().push_back(static_cast<int64_t>(il));
  }
  return runs;
}

Result<std::vector<std::shared_ptr<DeviceWeights>>> place_split(std::shared_ptr<const Model> model,
                                                                const LayerSplit& split,
                                                                const WeightOptions& options,
                                                                const SegmentLayers& segments) {
  std::vector<std::shared_ptr<DeviceWeights>> out;
  const int64_t n_layer = model->hparams().n_layer;
  for (Device* d : split.devices_used(model->weights())) {
    const auto seg = segments.find(d);
    const bool streams = seg != segments.end() && seg->second > 0;
    WeightOptions o = options;
    o.holds = [&split, d, streams, n_layer](int64_t layer, const GgufTensorInfo& t) {
      return split.device_of(layer, t.name) == d && (!streams || layer < 0 || layer >= n_layer);
    };
    KILN_ASSIGN_OR_RETURN(auto w, DeviceWeights::create(model, *d, std::move(o)));
    if (streams) {
      std::vector<std::shared_ptr<const DeviceWeights>> parts;
      for (const std::vector<int64_t>& run : segment_layer_runs(split, model->weights(), *d, seg->second)) {
        WeightOptions so = options;
        so.holds = [&split, d, &run](int64_t layer, const GgufTensorInfo& t) {
          return split.device_of(layer, t.name) == d && std::find(run.begin(), run.end(), layer) != run.end();
        };
        so.name_suffix = "(layers " + std::to_string(run.front()) +
                         (run.size() > 1 ? "-" + std::to_string(run.back()) : "") + ")";
        KILN_ASSIGN_OR_RETURN(auto part, DeviceWeights::create(model, *d, std::move(so)));
        parts.push_back(std::move(part));
      }
      w->set_segments(std::move(parts));
    }
    out.push_back(std::move(w));
  }
  return out;
}

}  // namespace kiln
