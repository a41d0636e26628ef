// Residency on vulkan0 as on sim0 (tests/llm/residency_test.cpp runs the same cycles there): 50
// evictions and restores in the middle of a generation, the weights' and KV cache's device memory
// freed for real (vkFreeMemory) at each, the logits equal an uninterrupted run's bit for bit, with the KV
// cache's copy in host memory or in a swap file; two models on a budget that holds one take turns,
// each answer bit for bit the one with room for both; a budget that the weights alone pass is refused
// with the device, the bytes asked and free named and nothing left allocated; a model's layers
// streamed through vulkan0 in segments give the bits of the same layers held whole there.
#include <gtest/gtest.h>

#include "llm/device_residency_suite.h"
#include "llm/segmented_suite.h"
#include "vulkan_test_util.h"

namespace kiln::test {
namespace {

TEST(VulkanResidency, FiftyEvictRestoreCyclesFreeTheMemoryAndGiveIdenticalLogits) {
  fifty_cycles_on_device("vulkan0", "");
}

TEST(VulkanResidency, FiftyEvictRestoreCyclesThroughASwapFileGiveIdenticalLogits) {
  TempDir dir("kiln-swap");
  fifty_cycles_on_device("vulkan0", dir.path());
  EXPECT_EQ(open_files_in(dir.path()), 0);
}

TEST(VulkanResidency, TwoModelsTakeTurnsOnABudgetThatHoldsOne) { two_models_take_turns("vulkan0", 4); }

TEST(VulkanResidency, LayersStreamedInSegmentsGiveTheBitsOfTheLayersHeldWhole) { streamed_equals_whole("vulkan0"); }

TEST(VulkanResidency, WeightsAboveTheBudgetAreRefusedNamingTheDeviceWithNothingAllocated) {
  auto model = load(model_path("llama-spm-e256-Q4_0.gguf"));
  ASSERT_TRUE(model);
  auto devices = make_devices(64 * kMiB, {{.device = "vulkan0", .gib = 1.0 / 4096}}, {}, true);
  ASSERT_TRUE(devices);
  Device& dev = **devices->find("vulkan0");
  auto w = DeviceWeights::create(model, dev);
  ASSERT_FALSE(w.ok());
  EXPECT_NE(w.error().message.find("vulkan0"), std::string::npos) << w.error().message;
  for (MemoryKind k : {MemoryKind::Weights, MemoryKind::Kv, MemoryKind::Compute, MemoryKind::Scratch})
    EXPECT_EQ(dev.allocated_bytes(k), 0u) << memory_kind_name(k);
}

}  // namespace
}  // namespace kiln::test
