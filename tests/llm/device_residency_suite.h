// The residency tests of a device that is not the host, shared by every such device (tests/llm:
// sim0; tests/vulkan: vulkan0): functions over the device's name, not a copy per device.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "backends/sim/sim_device.h"
#include "llm/model_test_util.h"
#include "temp_dir.h"

namespace kiln::test {

inline constexpr size_t kMiB = size_t{1} << 20;

inline const ContextOptions kOpt{.n_ctx = 96, .n_batch = 64, .n_ubatch = 16};
inline constexpr int kSteps = 50;

// Logits of a 12-token prompt and of kSteps greedy steps after it; before each step `between(step)`
// runs (eviction, spacers, ...).
template <typename Between>
inline std::vector<float> generate(Context& c, Between between) {
  std::vector<float> out;
  const auto prompt = spread_tokens(c, 12);
  decode(c, prompt, 0, 0, false, out);
  int32_t pos = static_cast<int32_t>(prompt.size());
  for (int step = 0; step < kSteps; ++step) {
    between(step);
    decode(c, {argmax({out.end() - c.n_vocab(), out.end()})}, pos++, 0, false, out);
  }
  return out;
}

// generate() on `device` of a registry of its own, uninterrupted.
inline std::vector<float> uninterrupted(const std::shared_ptr<const Model>& model, const std::string& device) {
  auto devices = make_devices(64 * kMiB, {}, {}, is_vulkan_device_name(device));
  OnDevice o = place(*devices, device, model, kOpt);
  return o.ctx ? generate(*o.ctx, [](int) {}) : std::vector<float>{};
}

inline bool dir_empty(const std::string& dir) { return std::filesystem::is_empty(dir); }

// 50 evictions and restores on `device` (not the host: sim0, vulkan0) in the middle of a
// generation; each eviction frees the weights' and the KV cache's device memory; the KV cache's
// copy is in host memory or, with `swap_dir`, in a file there that exists only while the cache is
// evicted. On sim0 (one pool, best fit) every restore lands at new addresses (a spacer takes the
// front of the freed memory); a Vulkan driver picks each allocation's address itself (it may give
// the freed one back: the poisoned memory, KILN_VULKAN_POISON, still proves the restore copied).
inline void fifty_cycles_on_device(const std::string& device, const std::string& swap_dir) {
  auto model = load(model_path("llama-spm-e256-Q4_0.gguf"));
  ASSERT_TRUE(model);
  const std::vector<float> reference = uninterrupted(model, device);
  auto devices = make_devices(64 * kMiB, {}, swap_dir, is_vulkan_device_name(device));
  Device& dev = **devices->find(device);
  ResidencyManager& manager = devices->residency(dev);
  OnDevice o = place(*devices, device, model, kOpt);
  ASSERT_TRUE(o.ctx);
  const OwnerId owner = o.weights->owner();
  std::unique_ptr<Buffer> spacer;
  const void* weights_at = nullptr;
  const void* kv_at = nullptr;
  uint64_t kv_generation = o.ctx->kv().generation();
  int moved_weights = 0, moved_kv = 0;
  const auto logits = generate(*o.ctx, [&](int step) {
    if (step > 0) {  // the previous step restored everything: did it land elsewhere?
      moved_weights += o.weights->buffer()->base() != weights_at;
      moved_kv += o.ctx->kv().k(0).data != kv_at;
      EXPECT_EQ(o.ctx->kv().generation(), kv_generation + 1);
      kv_generation = o.ctx->kv().generation();
    }
    if (!swap_dir.empty()) {
      ASSERT_EQ(open_files_in(swap_dir), 0) << "the swap file outlived the restore";
    }
    weights_at = o.weights->buffer()->base();
    kv_at = o.ctx->kv().k(0).data;
    const Status st = manager.evict_owner(owner);
    ASSERT_TRUE(st.ok()) << st.error().message;
    ASSERT_FALSE(o.weights->resident());
    ASSERT_FALSE(manager.owner_resident(owner));
    ASSERT_EQ(dev.allocated_bytes(MemoryKind::Weights), 0u);
    ASSERT_EQ(dev.allocated_bytes(MemoryKind::Kv), 0u);
    if (!swap_dir.empty()) {
      ASSERT_EQ(open_files_in(swap_dir), 1);  // one file for the one evicted KV cache
      ASSERT_TRUE(dir_empty(swap_dir));       // and it has no name
    }
    // A spacer of another size than the last one, at the front of the freed memory: the restore
    // that the next decode does must place everything at other offsets.
    spacer.reset();
    auto s = dev.allocate({(1 + static_cast<size_t>(step % 2)) * kMiB / 4, MemoryKind::Compute, "spacer"});
    ASSERT_TRUE(s.ok()) << s.error().message;
    spacer = std::move(*s);
  });
  EXPECT_TRUE(same_bits(logits, reference)) << "logits after eviction and restore differ";
  if (!is_vulkan_device_name(device)) {
    EXPECT_EQ(moved_weights, kSteps - 1);
    EXPECT_EQ(moved_kv, kSteps - 1);
  }
  EXPECT_TRUE(manager.owner_resident(owner));
}

// The device memory a model and its context take on `device` once decoding: on sim0 the peak the
// pool saw, elsewhere what the residency manager counts.
inline size_t footprint(const std::shared_ptr<const Model>& model, const std::string& device) {
  auto devices = make_devices(256 * kMiB, {}, {}, is_vulkan_device_name(device));
  OnDevice o = place(*devices, device, model, kOpt);
  std::vector<float> out;
  decode(*o.ctx, spread_tokens(*o.ctx, 8), 0, 0, false, out);  // the scratch is allocated by the first pass
  Device& dev = **devices->find(device);
  if (auto* sim = dynamic_cast<SimDevice*>(&dev)) return sim->peak_used();
  return devices->residency(dev).used();
}

// One request: the cache cleared, a prompt of 4 `seed`-dependent tokens, 2 greedy steps; its logits.
// A 4-token prompt chosen by `seed`, then 2 greedy tokens, from a cleared context: the logits.
inline std::vector<float> request(Context& c, int seed) {
  c.clear();
  std::vector<int32_t> prompt;
  for (int i = 0; i < 4; ++i) prompt.push_back(static_cast<int32_t>((seed * 131 + i * 7919 + 3) % c.n_vocab()));
  std::vector<float> out;
  decode(c, prompt, 0, 0, false, out);
  for (int32_t pos = 4; pos < 6; ++pos) decode(c, {argmax({out.end() - c.n_vocab(), out.end()})}, pos, 0, false, out);
  return out;
}

// Two models on a budget of `device` that holds one: `n` requests to each in turn, every answer
// bit for bit the one of a device with room for both, the other model evicted each time, the
// manager never above the budget (nor sim0's pool), and the breakdown counting both owners.
inline void two_models_take_turns(const std::string& device, int n) {
  auto a = load(model_path("llama-spm-e256-Q4_0.gguf"));
  auto b = load(model_path("qwen2-e64-Q8_0.gguf"));
  ASSERT_TRUE(a && b);
  const size_t fa = footprint(a, device), fb = footprint(b, device);
  const size_t budget = std::max(fa, fb) + kMiB / 2;
  ASSERT_LT(budget, fa + fb) << "the budget must not hold both models";

  // References: a device with room for both.
  std::vector<std::vector<float>> ref_a, ref_b;
  {
    auto devices = make_devices(256 * kMiB, {}, {}, is_vulkan_device_name(device));
    OnDevice oa = place(*devices, device, a, kOpt), ob = place(*devices, device, b, kOpt);
    ASSERT_TRUE(oa.ctx && ob.ctx);
    for (int i = 0; i < n; ++i) {
      ref_a.push_back(request(*oa.ctx, i));
      ref_b.push_back(request(*ob.ctx, i));
    }
  }
  const double gib = static_cast<double>(budget) / static_cast<double>(size_t{1} << 30);
  auto devices = make_devices(256 * kMiB, {{.device = device, .gib = gib}}, {}, is_vulkan_device_name(device));
  Device& dev = **devices->find(device);
  ResidencyManager& manager = devices->residency(dev);
  auto* sim = dynamic_cast<SimDevice*>(&dev);
  if (sim) sim->reset_peak_used();
  OnDevice oa = place(*devices, device, a, kOpt);
  OnDevice ob = place(*devices, device, b, kOpt);  // evicts a
  ASSERT_TRUE(oa.ctx && ob.ctx);
  EXPECT_FALSE(manager.owner_resident(oa.weights->owner()));
  for (int i = 0; i < n; ++i) {
    EXPECT_TRUE(same_bits(request(*oa.ctx, i), ref_a[static_cast<size_t>(i)])) << "request " << 2 * i;
    EXPECT_FALSE(manager.owner_resident(ob.weights->owner()));
    EXPECT_TRUE(same_bits(request(*ob.ctx, i), ref_b[static_cast<size_t>(i)])) << "request " << 2 * i + 1;
    EXPECT_FALSE(manager.owner_resident(oa.weights->owner()));
  }
  if (sim) {
    EXPECT_LE(sim->peak_used(), manager.budget());
  }
  EXPECT_LE(manager.used(), manager.budget());

  // The breakdown counts both owners: b resident, a evicted.
  const DeviceMemoryBreakdown bd = manager.breakdown();
  EXPECT_EQ(bd.unaccounted, 0u);
  size_t owners_with_weights = 0;
  for (const OwnerMemory& om : bd.owners) {
    if (om.owner == oa.weights->owner()) {
      EXPECT_GT(om.evicted_residents, 0u);
    }
    if (om.owner == ob.weights->owner()) {
      EXPECT_GT(om.bytes[static_cast<int>(MemoryKind::Weights)], 0u);
    }
    owners_with_weights += om.bytes[static_cast<int>(MemoryKind::Weights)] > 0;
  }
  EXPECT_EQ(owners_with_weights, 1u);
}

}  // namespace kiln::test
