#include "llm/placement_fit.h"

#include <algorithm>

#include "llm/kv_cache.h"
#include "models/decoder_graph.h"
#include "runtime/graph_split.h"
#include "runtime/memory_breakdown.h"
#include "runtime/residency.h"

namespace kiln {
namespace {

// Stand-in device addresses for the estimate's graph: device d's memory at [(d + 1) << 40, ...).
constexpr int kAddressShift = 40;
void* stand_in(size_t device, size_t offset) {
  return reinterpret_cast<void*>(((device + 1) << kAddressShift) + offset);
}
size_t device_of_address(const void* p) {
  const auto a = reinterpret_cast<uintptr_t>(p);
  return a < (uintptr_t{1} << kAddressShift) ? kNoDevice : (a >> kAddressShift) - 1;
}

size_t index_of(const std::vector<Device*>& devices, const Device* d) {
  return static_cast<size_t>(std::find(devices.begin(), devices.end(), d) - devices.begin());
}

size_t saturating_sub(size_t a, size_t b) { return a > b ? a - b : 0; }

std::string estimate_text(const DeviceEstimate& e) {
  return e.device->name() + " " + format_memory_size(e.total());
}

}  // namespace

size_t fit_target(const FitOptions& fit, size_t i, const Device& device) {
  if (fit.targets.empty()) return device.default_fit_target();
  return fit.targets[std::min(i, fit.targets.size() - 1)];
}

size_t device_room(const Device& device, size_t target, bool in_turns) {
  const ResidencyManager* m = device.residency();
  const MemoryInfo info = device.memory_info();
  if (m != nullptr && m->budget() != kNoBudget) return std::min(m->budget(), info.total);
  if (in_turns) return saturating_sub(info.total, target);
  const size_t evictable = m != nullptr ? m->used() : 0;
  return saturating_sub(std::min(info.free + evictable, info.total), target);
}

Result<std::vector<DeviceEstimate>> estimate_placement(const Model& model, const LayerSplit& split,
                                                       const ContextOptions& options, const WeightOptions& weights,
                                                       DeviceWeights::LayoutCache* cache) {
  const HParams& hp = model.hparams();
  const ContextOptions opt = resolve_context_options(options, hp);
  const std::vector<Device*> devices = split.devices_used(model.weights());
  if (opt.kv_on_host && index_of(devices, split.host()) == devices.size())
    return make_error("context: the KV cache in host memory (-nkvo) needs the CPU among the model's devices");
  std::vector<DeviceEstimate> out;
  std::vector<std::string> names;
  std::vector<size_t> alignments, next(devices.size(), 0);
  for (Device* d : devices) {
    DecoderWeights held = model.weights();
    for_each_weight_slot(held, [&](Weight& w, WeightUse, int64_t layer) {
      if (w && split.device_of(layer, w.info->name) != d) w = Weight{};
    });
    out.push_back({d, DeviceWeights::footprint(held, *d, weights, cache).total(), 0, 0});
    names.push_back(d->name());
    alignments.push_back(arena_alignment(*d));
  }
  // The graph over stand-in addresses: each weight and each layer's K and V in its device's range.
  DecoderWeights placed = model.weights();
  for_each_weight_slot(placed, [&](Weight& w, WeightUse, int64_t layer) {
    if (!w) return;
    const size_t d = index_of(devices, split.device_of(layer, w.info->name));
    w.view.data = stand_in(d, next[d]);
    next[d] += (w.view.span_bytes() + 63) / 64 * 64;
  });
  const int64_t cells = KvCache::cells_for(opt.n_ctx);
  std::vector<KvLayerMemory> kv;
  for (int64_t il = 0; il < hp.n_layer; ++il) {
    const Weight& wk = model.weights().blocks[static_cast<size_t>(il)].attn.wk;
    const size_t d = index_of(devices, opt.kv_on_host ? split.host() : split.device_of(il, wk.info->name));
    KvLayerMemory m;
    m.k = contiguous_view(opt.type_k, {hp.n_embd_k_gqa(), cells, 1, 1}, stand_in(d, next[d]));
    next[d] += (m.k.span_bytes() + 63) / 64 * 64;
    m.v = contiguous_view(opt.type_v, {hp.n_embd_v_gqa(), cells, 1, 1}, stand_in(d, next[d]));
    next[d] += (m.v.span_bytes() + 63) / 64 * 64;
    kv.push_back(m);
    out[d].kv += KvCache::bytes_for(hp, opt.n_ctx, opt.type_k, opt.type_v, 1);
  }
  Graph worst;
  const AttentionPath attention = opt.flash_attention == FlashAttention::Off ? AttentionPath::Plain : AttentionPath::Flash;
  KILN_TRY(build_decoder_graph(worst, hp, placed, kv, worst_case_step(opt, attention)));
  KILN_ASSIGN_OR_RETURN(const SplitMeasure m,
                        SplitPlan::measure(worst, [](const TensorView& v) { return device_of_address(v.data); }, names,
                                           alignments));
  const size_t inputs = context_input_bytes(opt, hp);
  for (size_t d = 0; d < out.size(); ++d)
    out[d].compute = inputs + m.transfer_bytes[d] + m.arena_bytes[d] + m.scratch_bytes[d];
  return out;
}

namespace {

// Bytes of the weights of `layers` that lie on `device`, laid out as one segment of their own.
size_t segment_bytes(const Model& model, const LayerSplit& split, const Device& device,
                     const std::vector<int64_t>& layers, const WeightOptions& weights,
                     DeviceWeights::LayoutCache* cache) {
  DecoderWeights held = model.weights();
  for_each_weight_slot(held, [&](Weight& w, WeightUse, int64_t layer) {
    if (w && (split.device_of(layer, w.info->name) != &device || std::find(layers.begin(), layers.end(), layer) == layers.end()))
      w = Weight{};
  });
  return DeviceWeights::footprint(held, device, weights, cache).total();
}

// What stays on the device of `here` when its share streams: its estimate less every layer.
size_t segmented_stays(const Model& model, const LayerSplit& split, const DeviceEstimate& here,
                       const WeightOptions& weights, DeviceWeights::LayoutCache* cache) {
  size_t streamed = 0;
  for (const auto& one : segment_layer_runs(split, model.weights(), *here.device, 1))
    streamed += segment_bytes(model, split, *here.device, one, weights, cache);
  return here.total() - std::min(here.total(), streamed);
}

// The largest of the device's segments of `per` layers.
size_t largest_segment(const Model& model, const LayerSplit& split, const Device& device, int64_t per,
                       const WeightOptions& weights, DeviceWeights::LayoutCache* cache) {
  size_t largest = 0;
  for (const auto& run : segment_layer_runs(split, model.weights(), device, per))
    largest = std::max(largest, segment_bytes(model, split, device, run, weights, cache));
  return largest;
}

}  // namespace

size_t segmented_peak(const Model& model, const LayerSplit& split, const DeviceEstimate& here, int64_t per,
                      const WeightOptions& weights, DeviceWeights::LayoutCache* cache) {
  return segmented_stays(model, split, here, weights, cache) +
         2 * largest_segment(model, split, *here.device, per, weights, cache);
}

Result<int64_t> fit_segment_layers(const Model& model, const LayerSplit& split, Device& device,
                                   const ContextOptions& options, const WeightOptions& weights, size_t room) {
  DeviceWeights::LayoutCache cache;
  KILN_ASSIGN_OR_RETURN(const std::vector<DeviceEstimate> all, estimate_placement(model, split, options, weights, &cache));
  const auto here = std::find_if(all.begin(), all.end(), [&](const DeviceEstimate& e) { return e.device == &device; });
  if (here == all.end()) return int64_t{0};
  if (here->total() <= room) return int64_t{0};
  const size_t stays = segmented_stays(model, split, *here, weights, &cache);
  const auto n_layers = static_cast<int64_t>(segment_layer_runs(split, model.weights(), device, 1).size());
  for (int64_t per = n_layers / 2; per >= 1; --per)
    if (stays + 2 * largest_segment(model, split, device, per, weights, &cache) <= room) return per;
  return make_error("segmented: ", device.name(), " has ", format_memory_size(room), " of room; what stays there (",
                    "the K and V of its layers, compute and its other weights) takes ", format_memory_size(stays),
                    ", and two segments of one layer ",
                    format_memory_size(2 * largest_segment(model, split, device, 1, weights, &cache)), " more");
}

std::string describe_estimate(const std::vector<DeviceEstimate>& estimate) {
  std::string out;
  for (const DeviceEstimate& e : estimate) {
    out += e.device->name() + ": weights " + format_memory_size(e.weights) + ", KV " + format_memory_size(e.kv) +
           ", compute " + format_memory_size(e.compute) + ", total " + format_memory_size(e.total()) + " (room " +
           format_memory_size(device_room(*e.device, 0, false)) + ")";
    if (e.segment_layers > 0)
      out += "; its layers streamed in segments of " + std::to_string(e.segment_layers) + ": at most " +
             format_memory_size(e.segmented_peak) + " at once";
    out += "\n";
  }
  return out;
}

Result<FitChoice> fit_placement(const Model& model, const std::vector<Device*>& offload, Device& cpu,
                                const ContextOptions& options, const WeightOptions& weights, const FitOptions& fit) {
  const HParams& hp = model.hparams();
  DeviceWeights::LayoutCache cache;
  FitChoice choice;
  choice.n_ctx = resolve_context_options(options, hp).n_ctx;
  auto estimate = [&](const SplitOptions& so, int64_t n_ctx) -> Result<std::vector<DeviceEstimate>> {
    KILN_ASSIGN_OR_RETURN(const LayerSplit split, LayerSplit::make(hp, so, cpu));
    ContextOptions o = options;
    o.n_ctx = n_ctx;
    return estimate_placement(model, split, o, weights, &cache);
  };
  std::vector<size_t> room;  // per offload device, then the CPU, less the targets
  for (size_t i = 0; i < offload.size(); ++i)
    room.push_back(device_room(*offload[i], fit_target(fit, i, *offload[i]), fit.in_turns));
  const size_t cpu_room = device_room(cpu, fit_target(fit, offload.size(), cpu), false);
  if (offload.empty()) return choice;

  // The whole model on the main device, as without fit.
  Device* main = offload.front();
  KILN_ASSIGN_OR_RETURN(choice.estimate,
                        estimate({.offload = {main}, .overrides = {{".*", main}}}, choice.n_ctx));
  if (choice.estimate.front().total() <= room.front()) return choice;
  const std::string whole = format_memory_size(choice.estimate.front().total());

  std::vector<int64_t> n_ctx_candidates{choice.n_ctx};
  for (int64_t c = choice.n_ctx / 2; !fit.ctx_set && c >= fit.min_ctx; c /= 2) n_ctx_candidates.push_back(c);
  std::vector<DeviceEstimate> last;
  for (const int64_t n_ctx : n_ctx_candidates) {
    // Layers from the back: the last device first (it takes the output layer), each as many whole
    // layers as fit its room; counts[i] for offload[i].
    std::vector<int64_t> counts(offload.size(), 0);
    int64_t left = hp.n_layer + 1;
    auto options_for = [&](const std::vector<int64_t>& c) {
      SplitOptions so{.offload = offload, .n_gpu_layers = 0};
      for (int64_t n : c) {
        so.n_gpu_layers += n;
        so.tensor_split.push_back(static_cast<float>(n));
      }
      if (so.n_gpu_layers == 0) so.tensor_split.clear();
      return so;
    };
    for (size_t j = offload.size(); j-- > 0;) {
      int64_t lo = 0, hi = left;  // lo fits (none), find the most that fits
      while (lo < hi) {
        const int64_t mid = (lo + hi + 1) / 2;
        std::vector<int64_t> c = counts;
        c[j] = mid;
        KILN_ASSIGN_OR_RETURN(const std::vector<DeviceEstimate> e, estimate(options_for(c), n_ctx));
        const auto it = std::find_if(e.begin(), e.end(), [&](const DeviceEstimate& x) { return x.device == offload[j]; });
        if (it != e.end() && it->total() <= room[j]) lo = mid;
        else hi = mid - 1;
      }
      counts[j] = lo;
      left -= lo;
    }
    const SplitOptions so = options_for(counts);
    KILN_ASSIGN_OR_RETURN(last, estimate(so, n_ctx));
    const auto on_cpu = std::find_if(last.begin(), last.end(), [&](const DeviceEstimate& x) { return x.device == &cpu; });
    if (on_cpu != last.end() && on_cpu->total() > cpu_room) continue;
    choice.split = true;
    choice.options = so;
    choice.estimate = last;
    std::string parts;
    for (const DeviceEstimate& e : last) parts += (parts.empty() ? "" : ", ") + estimate_text(e);
    choice.summary = "fit: the model and its context (" + whole + ") do not fit " + main->name() + " (" +
                     format_memory_size(room.front()) + " of room): -ngl " +
                     std::to_string(so.n_gpu_layers);
    if (offload.size() > 1) {
      choice.summary += " -ts ";
      for (size_t i = 0; i < counts.size(); ++i) choice.summary += (i ? "," : "") + std::to_string(counts[i]);
    }
    choice.summary += " (" + parts + ")";
    if (n_ctx != choice.n_ctx)
      choice.summary += "; context " + std::to_string(n_ctx) + " instead of " + std::to_string(choice.n_ctx) +
                        " (-fitc " + std::to_string(fit.min_ctx) + ")";
    choice.n_ctx = n_ctx;
    return choice;
  }
  std::string sizes;
  for (const DeviceEstimate& e : last) sizes += (sizes.empty() ? "" : ", ") + estimate_text(e);
  std::string rooms;
  for (size_t i = 0; i < offload.size(); ++i) rooms += offload[i]->name() + " " + format_memory_size(room[i]) + ", ";
  rooms += cpu.name() + " " + format_memory_size(cpu_room);
  return make_error("fit: the model does not fit: the closest placement needs ", sizes, "; the room is ", rooms,
                    fit.ctx_set ? "" : " (with the context down to -fitc)");
}

}  // namespace kiln
