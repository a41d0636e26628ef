// The SD 1.x networks as residents of a device (diffusion/device_network.h), on the random-weight
// test models (build/test-data/sd/) at 64x64, 2 steps of sd-cli's defaults with CFG 7:
// - on sim0 with room for everything, the final latent and the pixels are bit-identical to the
//   CPU's (the same kernels over a device's memory, the weights uploaded, not read in place);
// - on sim0 with a budget smaller than the three networks' weights and the arena together, the
//   manager evicts the networks that are not computing (the text encoder during the steps, the UNet
//   for the decode) and the image is still bit-identical, the device's peak within the budget;
// - a second image on the same budget restores what was evicted, bit for bit.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "backends/device_registry.h"
#include "backends/sim/sim_device.h"
#include "diffusion/sampling_defaults.h"
#include "diffusion/sd_models.h"
#include "diffusion/text_to_image.h"
#include "runtime/memory_breakdown.h"
#include "test_data.h"

namespace kiln::diffusion {
namespace {

constexpr size_t kMiB = size_t{1} << 20;

SdModelPaths test_paths() {
  SdModelPaths paths;
  paths.clip_l = test_data::path("sd/clip-l-f32.safetensors");
  paths.diffusion_model = test_data::path("sd/unet-sd1-c32-f32.safetensors");
  paths.taesd = test_data::path("sd/taesd-f32.safetensors");
  return paths;
}

TextToImageParams test_params() {
  TextToImageParams p;
  p.prompt = "a cat";
  p.width = p.height = 64;
  p.steps = 2;
  p.sampler = default_sampler(ModelFamily::Sd1);
  p.scheduler = default_scheduler(p.sampler);
  p.eta = default_eta(p.sampler);
  return p;
}

struct Image {
  std::vector<float> latent;
  std::vector<uint8_t> pixels;
};

// The image of test_params() through the whole loop.
Image generate(SdModels& m) {
  const TextToImageParams params = test_params();
  Image img;
  auto cond = encode_conditioning(m.text_encoder(), params);
  EXPECT_TRUE(cond.ok()) << cond.error().message;
  if (!cond.ok()) return img;
  auto latent = sample_latent(m.unet(), m.schedule(), *cond, params, 0);
  EXPECT_TRUE(latent.ok()) << latent.error().message;
  if (!latent.ok()) return img;
  img.latent = *latent;
  auto pixels = decode_to_pixels(m.decoder(), img.latent, params);
  EXPECT_TRUE(pixels.ok()) << pixels.error().message;
  if (pixels.ok()) img.pixels = std::move(*pixels);
  return img;
}

// The networks on `device` of `devices`, in that device's shared arena.
std::unique_ptr<SdModels> open_on(DeviceRegistry& devices, const std::string& device) {
  auto dev = devices.find(device);
  EXPECT_TRUE(dev.ok()) << dev.error().message;
  if (!dev.ok()) return nullptr;
  auto m = SdModels::open(test_paths(), {&devices.backend(**dev), &devices.arena(**dev), {}});
  EXPECT_TRUE(m.ok()) << m.error().message;
  return m.ok() ? std::move(*m) : nullptr;
}

std::unique_ptr<DeviceRegistry> registry(double sim_budget_gib) {
  DeviceRegistryOptions o;
  o.n_threads = 2;
  o.sim.push_back({.name = "sim0", .capacity = size_t{2} << 30});
  if (sim_budget_gib > 0) o.budgets.push_back({"sim0", sim_budget_gib});
  auto r = DeviceRegistry::create(o);
  EXPECT_TRUE(r.ok()) << r.error().message;
  return r.ok() ? std::move(*r) : nullptr;
}

const DeviceMemoryBreakdown& sim0(const std::vector<DeviceMemoryBreakdown>& all) {
  return *std::find_if(all.begin(), all.end(),
                       [](const DeviceMemoryBreakdown& d) { return d.device == "sim0"; });
}

size_t owner_bytes(const OwnerMemory& o) {
  size_t n = 0;
  for (size_t b : o.bytes) n += b;
  return n;
}

TEST(DiffusionResidency, BudgetSmallerThanTheNetworksGivesTheSameImage) {
  // The CPU's image: weights read in place, the CPU's arena.
  Image cpu;
  {
    auto devices = registry(0);
    ASSERT_NE(devices, nullptr);
    auto m = open_on(*devices, "cpu");
    ASSERT_NE(m, nullptr);
    cpu = generate(*m);
    ASSERT_EQ(cpu.pixels.size(), size_t{64 * 64 * 3});
  }
  // sim0 with room: every network stays; what each holds sizes the budget below.
  size_t largest = 0, sum = 0;
  {
    auto devices = registry(0);
    ASSERT_NE(devices, nullptr);
    auto m = open_on(*devices, "sim0");
    ASSERT_NE(m, nullptr);
    const Image roomy = generate(*m);
    EXPECT_EQ(roomy.latent, cpu.latent);
    EXPECT_EQ(roomy.pixels, cpu.pixels);
    const DeviceMemoryBreakdown d = sim0(devices->memory_breakdown());
    size_t arena = 0, scratch = 0;
    for (const OwnerMemory& o : d.owners) {
      const size_t bytes = owner_bytes(o);
      std::printf("  sim0, roomy: %s %zu MiB\n", o.name.c_str(), bytes / kMiB);
      EXPECT_EQ(o.evicted_residents, 0u) << o.name;
      sum += bytes;
      if (o.name.starts_with("compute")) {
        arena = bytes;
      } else if (o.name.ends_with("scratch")) {
        scratch = bytes;  // the backend's, never evicted
      } else {
        largest = std::max(largest, bytes);
      }
    }
    ASSERT_GT(arena, 0u);
    largest += arena + scratch;
  }
  // The largest network, the arena and the backend's scratch, plus 4 MiB: less than everything
  // together.
  const size_t budget = largest + 4 * kMiB;
  ASSERT_LT(budget, sum);
  auto devices = registry(static_cast<double>(budget) / static_cast<double>(size_t{1} << 30));
  ASSERT_NE(devices, nullptr);
  auto* sim = dynamic_cast<SimDevice*>(*devices->find("sim0"));
  ASSERT_NE(sim, nullptr);
  sim->reset_peak_used();
  auto m = open_on(*devices, "sim0");
  ASSERT_NE(m, nullptr);
  const Image tight = generate(*m);
  EXPECT_EQ(tight.latent, cpu.latent);
  EXPECT_EQ(tight.pixels, cpu.pixels);
  size_t evicted = 0;
  const auto breakdown = devices->memory_breakdown();  // sim0() returns a reference into it
  for (const OwnerMemory& o : sim0(breakdown).owners) evicted += o.evicted_residents;
  EXPECT_GT(evicted, 0u) << "nothing was evicted: the budget did not bind";
  // Again: the text encoder and the UNet come back from eviction with the same bytes.
  const Image again = generate(*m);
  EXPECT_EQ(again.latent, cpu.latent);
  EXPECT_EQ(again.pixels, cpu.pixels);
  EXPECT_LE(sim->peak_used(), budget);
  std::printf("  sim0: budget %zu MiB (the networks and the arena: %zu MiB), peak %zu MiB\n", budget / kMiB,
              sum / kMiB, sim->peak_used() / kMiB);
}

}  // namespace
}  // namespace kiln::diffusion
