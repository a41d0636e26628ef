// Segmented execution's tests over any device that is not the host (tests/llm: sim0; tests/vulkan:
// vulkan0): the sizes a budget is made of, and the streamed run against the same placement held
// whole. Functions over the device's name, not a copy per device.
#pragma once

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "backends/device_registry.h"
#include "llm/context.h"
#include "llm/layer_split.h"
#include "llm/model_test_util.h"
#include "llm/placement_fit.h"
#include "test_data.h"

namespace kiln::test {

// Room for the buffers' alignment as the manager counts them and for the arena a context shift
// grows: less than a layer of the test models.
inline constexpr size_t kSegmentSlack = size_t{32} << 10;

// A registry with a sim0 of 256 MiB (and the Vulkan devices for a vulkan `device`), `device` with a
// budget of `budget` bytes (0: none).
inline std::unique_ptr<DeviceRegistry> with_budget(const std::string& device, size_t budget) {
  std::vector<DeviceBudget> budgets;
  if (budget > 0) budgets.push_back({device, static_cast<double>(budget) / (1 << 30)});
  return make_devices(size_t{256} << 20, std::move(budgets), {}, is_vulkan_device_name(device));
}

// The blocks on `device`, the output layer and the token embedding (a tied head too) on the CPU.
inline SplitOptions blocks_on(DeviceRegistry& r, const std::string& device) {
  return {.offload = {*r.find(device)}, .overrides = {{"^output|^token_embd", &r.cpu()}}};
}

// What `device` holds of `model` placed as blocks_on() says: the K/V and compute that stay there
// (`stays`), and the largest layer's weights.
struct Sizes {
  size_t stays = 0, largest_layer = 0;
};

inline Sizes sizes_on(std::shared_ptr<const Model> model, const ContextOptions& opt, const std::string& device) {
  auto r = with_budget(device, 0);
  if (!r) return {};
  auto split = LayerSplit::make(model->hparams(), blocks_on(*r, device), r->cpu());
  EXPECT_TRUE(split.ok());
  auto est = estimate_placement(*model, *split, opt, {}, nullptr);
  EXPECT_TRUE(est.ok()) << est.error().message;
  if (!est.ok()) return {};
  Sizes s;
  for (const DeviceEstimate& e : *est) {
    if (e.device->name() == device) s.stays = e.kv + e.compute;
  }
  Device& dev = **r->find(device);
  for (const auto& run : segment_layer_runs(*split, model->weights(), dev, 1)) {
    DecoderWeights held = model->weights();
    for_each_weight_slot(held, [&](Weight& w, WeightUse, int64_t layer) {
      if (w && (layer != run.front() || split->device_of(layer, w.info->name) != &dev)) w = Weight{};
    });
    s.largest_layer = std::max(s.largest_layer, DeviceWeights::footprint(held, dev, {}, nullptr).total());
  }
  return s;
}

// How many of the context's segments on `device` are resident now.
inline size_t resident_segments(const Context& c, const std::string& device) {
  size_t n = 0;
  for (const auto& w : c.device_weights()) n += w->resident() && w->segments().empty() && w->device().name() == device;
  return n;
}

// The six-layer model's blocks streamed through `device`, a layer a segment, on a budget for two
// segments beside what stays there: prompt_and_generation()'s logits equal those of the same
// placement held whole on the same device (the same kernels: the same bits), and segments were
// evicted to make room.
inline void streamed_equals_whole(const std::string& device) {
  auto model = load(test_data::path("segmented/llama-spm-e64-l6.gguf"));
  ASSERT_TRUE(model);
  const ContextOptions opt{.n_ctx = 64, .n_batch = 64, .n_ubatch = 8};
  const Sizes sz = sizes_on(model, opt, device);
  ASSERT_GT(sz.largest_layer, 0u);
  auto roomy = with_budget(device, 0);
  ASSERT_TRUE(roomy);
  SplitContext whole = place_split_context(*roomy, model, blocks_on(*roomy, device), opt);
  ASSERT_TRUE(whole.ctx);
  const auto want = prompt_and_generation(*whole.ctx);
  auto r = with_budget(device, sz.stays + 2 * sz.largest_layer + kSegmentSlack);
  ASSERT_TRUE(r);
  SplitContext streamed = place_split_context(*r, model, blocks_on(*r, device), opt, {{*r->find(device), 1}});
  ASSERT_TRUE(streamed.ctx);
  EXPECT_TRUE(same_bits(want, prompt_and_generation(*streamed.ctx)));
  EXPECT_LE(resident_segments(*streamed.ctx, device), 2u) << "segments done were evicted to make room";
}

}  // namespace kiln::test
