#include "llm/model_placement.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <limits>

#include "core/check.h"

namespace kiln {
namespace {

// `plan`'s split, or for the whole model on `main` a split that overrides every tensor to it.
Result<LayerSplit> split_of(const PlacementPlan& plan, const std::string& main, const DeviceRegistry& devices,
                            const HParams& hp) {
  SplitOptions so = plan.split;
  if (plan.whole) {
    KILN_ASSIGN_OR_RETURN(Device * d, devices.find(main));
    so.overrides = {{".*", d}};
  }
  return LayerSplit::make(hp, so, devices.cpu());
}

// Calls fn(item) for each item of list `v` cut at any of `separators`, stopping at the first error.
template <class Fn>
std::string for_each_item(const std::string& v, const char* separators, Fn&& fn) {
  size_t start = 0;
  while (true) {
    const size_t sep = v.find_first_of(separators, start);
    if (std::string e = fn(v.substr(start, sep - start)); !e.empty()) return e;
    if (sep == std::string::npos) return "";
    start = sep + 1;
  }
}

}  // namespace

Result<SplitOptions> resolve_split(const SplitFlags& flags, const std::string& main, const DeviceRegistry& devices) {
  SplitOptions so{.n_gpu_layers = flags.n_gpu_layers, .mode = flags.mode, .tensor_split = flags.tensor_split,
                  .main_device = flags.main_gpu};
  for (const std::string& name : flags.devices.empty() ? std::vector<std::string>{main} : flags.devices) {
    KILN_ASSIGN_OR_RETURN(Device * d, devices.find(name));
    if (!d->is_host()) so.offload.push_back(d);
  }
  for (const auto& [pattern, name] : flags.overrides) {
    KILN_ASSIGN_OR_RETURN(Device * d, devices.find(name));
    so.overrides.push_back({pattern, d});
  }
  return so;
}

namespace {

// Sets p.segments (and p.fit_summary) for p's placement: each offload device whose share does not
// fit its room streams it.
Status plan_segments(PlacementPlan& p, const FitOptions& fit, const std::string& main, const DeviceRegistry& devices,
                     const Model& model, const WeightOptions& weights) {
  KILN_ASSIGN_OR_RETURN(const LayerSplit split, split_of(p, main, devices, model.hparams()));
  p.fit_summary.clear();
  for (size_t i = 0; i < p.split.offload.size(); ++i) {
    Device& d = *p.split.offload[i];
    const size_t room = device_room(d, fit_target(fit, i, d), fit.in_turns);
    KILN_ASSIGN_OR_RETURN(const int64_t per, fit_segment_layers(model, split, d, p.context, weights, room));
    if (per == 0) continue;
    p.segments[&d] = per;
    p.fit_summary += std::string(p.fit_summary.empty() ? "" : "; ") + d.name() + " streams its layers in segments of " +
                     std::to_string(per) + " (room " + format_memory_size(room) + ")";
  }
  if (p.fit_summary.empty()) p.fit_summary = "segmented: every device holds its layers (nothing to stream)";
  return ok_status();
}

}  // namespace

Result<PlacementPlan> plan_placement(const SplitFlags& flags, const std::string& main, const DeviceRegistry& devices,
                                     const Model& model, const ContextOptions& options, const WeightOptions& weights,
                                     bool ctx_given) {
  PlacementPlan p;
  KILN_ASSIGN_OR_RETURN(p.split, resolve_split(flags, main, devices));
  p.context = options;
  p.context.kv_on_host = flags.no_kv_offload;
  p.whole = !flags.splits();
  const FitOptions fit{.targets = flags.fit_targets,
                       .min_ctx = flags.fit_min_ctx,
                       .ctx_set = ctx_given,
                       .in_turns = flags.devices_in_turns};
  if (flags.segmented) {
    KILN_TRY(plan_segments(p, fit, main, devices, model, weights));
    return p;
  }
  if (flags.fit && p.whole && !p.split.offload.empty()) {
    auto fitted = fit_placement(model, p.split.offload, devices.cpu(), options, weights, fit);
    if (!fitted.ok()) {
      // The last resort: the whole model, streamed through the devices that cannot hold it.
      PlacementPlan streamed = p;
      if (!plan_segments(streamed, fit, main, devices, model, weights).ok()) return fitted.error();
      streamed.fit_summary = fitted.error().message + "; segmented instead: " + streamed.fit_summary;
      return streamed;
    }
    const FitChoice& choice = *fitted;
    if (choice.split) {
      p.split.n_gpu_layers = choice.options.n_gpu_layers;
      p.split.tensor_split = choice.options.tensor_split;
      p.context.n_ctx = choice.n_ctx;
      p.fit_summary = choice.summary;
      p.whole = false;
    }
  }
  return p;
}

Result<PlacedModel> place_model(std::shared_ptr<const Model> model, const PlacementPlan& plan, const std::string& main,
                                const DeviceRegistry& devices, const WeightOptions& weights) {
  PlacedModel out;
  if (plan.whole && plan.segments.empty()) {
    KILN_ASSIGN_OR_RETURN(Device * d, devices.find(main));
    KILN_ASSIGN_OR_RETURN(auto w, DeviceWeights::create(std::move(model), *d, weights));
    out.weights.push_back(std::move(w));
    return out;
  }
  KILN_ASSIGN_OR_RETURN(const LayerSplit split, split_of(plan, main, devices, model->hparams()));
  if (!plan.whole) out.layers = split.describe(model->hparams().n_layer);
  if (plan.context.kv_on_host) out.layers += "; every layer's K and V on " + devices.cpu().name();
  KILN_ASSIGN_OR_RETURN(out.weights, place_split(std::move(model), split, weights, plan.segments));
  return out;
}

Result<std::unique_ptr<Context>> create_placed_context(const std::vector<std::shared_ptr<DeviceWeights>>& placed,
                                                       const DeviceRegistry& devices, ContextOptions options,
                                                       const BackendOf& backend_of) {
  KILN_ASSERT(!placed.empty(), "create_placed_context: no weights");
  auto backend = [&](size_t i) -> Backend& {
    Device& d = placed[i]->device();
    return backend_of ? backend_of(d) : devices.backend(d);
  };
  options.arena = &devices.arena(placed.front()->device());
  if (placed.size() == 1) return Context::create(placed.front(), backend(0), options);
  std::vector<ContextDevice> parts;
  for (size_t i = 0; i < placed.size(); ++i)
    parts.push_back({placed[i], &backend(i), &devices.arena(placed[i]->device())});
  return Context::create(std::move(parts), options);
}

Result<Device*> encoder_device(const DeviceRegistry& devices, const std::string& name, Device& model_main) {
  if (name.empty()) return &model_main;
  auto d = devices.find(name);
  if (!d.ok()) return make_error("--mmproj-device: ", d.error().message);
  return *d;
}

SplitFlags draft_split_flags(const SplitFlags& target, const std::string& target_main,
                             const DraftPlacementFlags& draft, std::string* main) {
  SplitFlags out = target;
  *main = target_main;
  if (!draft.devices.empty()) {
    out.devices = draft.devices;
    *main = draft.devices.front();
  }
  out.n_gpu_layers = draft.n_gpu_layers;
  out.overrides = draft.overrides;
  return out;
}

Result<std::unique_ptr<Context>> place_draft_context(std::shared_ptr<const Model> draft, const SplitFlags& target,
                                                     const std::string& target_main,
                                                     const DraftPlacementFlags& flags,
                                                     const DeviceRegistry& devices, const ContextOptions& options,
                                                     const WeightOptions& weights, const BackendOf& backend_of,
                                                     const std::function<void(const std::string&)>& log) {
  std::string main;
  const SplitFlags split = draft_split_flags(target, target_main, flags, &main);
  KILN_ASSIGN_OR_RETURN(const PlacementPlan plan,
                        plan_placement(split, main, devices, *draft, options, weights, /*ctx_given=*/true));
  KILN_ASSIGN_OR_RETURN(const PlacedModel placed, place_model(std::move(draft), plan, main, devices, weights));
  if (log && !plan.fit_summary.empty()) log("draft model: " + plan.fit_summary);
  if (log && !placed.layers.empty()) log("draft model: " + placed.layers);
  return create_placed_context(placed.weights, devices, plan.context, backend_of);
}

Result<std::vector<DeviceEstimate>> estimate_plan(const Model& model, const PlacementPlan& plan, const std::string& main,
                                                  const DeviceRegistry& devices, const WeightOptions& weights) {
  KILN_ASSIGN_OR_RETURN(const LayerSplit split, split_of(plan, main, devices, model.hparams()));
  DeviceWeights::LayoutCache cache;
  KILN_ASSIGN_OR_RETURN(std::vector<DeviceEstimate> out, estimate_placement(model, split, plan.context, weights, &cache));
  for (DeviceEstimate& e : out) {
    const auto segments = plan.segments.find(e.device);
    if (segments == plan.segments.end() || segments->second <= 0) continue;
    e.segment_layers = segments->second;
    e.segmented_peak = segmented_peak(model, split, e, e.segment_layers, weights, &cache);
  }
  return out;
}

std::string parse_one_device(const std::string& v, std::string* out) {
  if (v == "none" || v == "cpu" || v == "CPU") {
    *out = "cpu";
  } else if (is_sim_device_name(v)) {
    *out = v;
  } else if (is_vulkan_device_name(v)) {
    *out = "vulkan" + v.substr(6);  // llama.cpp's Vulkan0 is vulkan0
  } else {
    return "no device '" + v + "' (cpu, a Vulkan device: vulkan0, vulkan1, ..., or a sim device: sim0, sim1, ...; "
           "--list-devices shows them)";
  }
  return "";
}

std::string parse_device_list(const std::string& v, std::string* main, std::vector<std::string>* all) {
  all->clear();
  const std::string e = for_each_item(v, ",", [&](const std::string& item) -> std::string {
    std::string one;
    if (std::string bad = parse_one_device(item, &one); !bad.empty()) return bad;
    if (std::find(all->begin(), all->end(), one) != all->end()) return "device '" + one + "' named twice in '" + v + "'";
    all->push_back(one);
    return "";
  });
  if (!e.empty()) return e;
  *main = all->front();
  return "";
}

std::string parse_gpu_layers(const std::string& v, int64_t* out) {
  if (v == "all" || v == "auto") {
    *out = SplitOptions::kAllLayers;
    return "";
  }
  char* end = nullptr;
  errno = 0;
  const long long n = std::strtoll(v.c_str(), &end, 10);
  if (v.empty() || *end != '\0' || errno != 0 || n < 0 || n > std::numeric_limits<int32_t>::max())
    return "'" + v + "' is not a layer count (N >= 0, auto or all)";
  *out = n;
  return "";
}

std::string parse_split_mode(const std::string& v, SplitMode* out) {
  if (v == "none") *out = SplitMode::None;
  else if (v == "layer") *out = SplitMode::Layer;
  else if (v == "row" || v == "tensor")
    return "split mode '" + v + "' (each matrix split across devices) is not supported: use none or layer";
  else
    return "'" + v + "' is not a split mode (none, layer)";
  return "";
}

std::string parse_tensor_split(const std::string& v, std::vector<float>* out) {
  out->clear();
  return for_each_item(v, ",/", [&](const std::string& one) -> std::string {
    char* end = nullptr;
    const float f = std::strtof(one.c_str(), &end);
    if (one.empty() || *end != '\0' || !std::isfinite(f) || f < 0) return "'" + one + "' is not a share (>= 0)";
    out->push_back(f);
    return "";
  });
}

std::string parse_overrides(const std::string& v, std::vector<std::pair<std::string, std::string>>* out) {
  return for_each_item(v, ",", [&](const std::string& one) -> std::string {
    const size_t eq = one.rfind('=');
    if (eq == std::string::npos || eq == 0) return "'" + one + "' is not PATTERN=DEVICE";
    std::string dev;
    if (std::string e = parse_one_device(one.substr(eq + 1), &dev); !e.empty()) return e;
    out->emplace_back(one.substr(0, eq), dev);
    return "";
  });
}

std::string parse_fit_targets(const std::string& v, std::vector<size_t>* out) {
  out->clear();
  return for_each_item(v, ",/", [&](const std::string& one) -> std::string {
    char* end = nullptr;
    errno = 0;
    const long long mib = std::strtoll(one.c_str(), &end, 10);
    if (one.empty() || *end != '\0' || errno != 0 || mib < 0 || mib > (int64_t{1} << 30))
      return "'" + one + "' is not a size in MiB (>= 0)";
    out->push_back(static_cast<size_t>(mib) << 20);
    return "";
  });
}

}  // namespace kiln
