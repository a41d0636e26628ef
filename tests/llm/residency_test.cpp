// Models under a residency manager: evicted and restored in the middle of a generation at new
// device addresses, the logits equal an uninterrupted run's bit for bit (sim0 and the CPU); two
// models that take turns on a sim0 budget that holds one give the answers they give with room for
// both, and the device never holds more than the budget; a model whose weights alone pass the
// budget is refused with nothing left allocated; the device's compute arena is counted under an
// owner of its own and released and restored by itself. With a swap directory (--swap-dir) the
// KV cache goes to an unnamed file there and back, bit for bit, also on the CPU; a file that
// cannot be written fails the eviction and loses nothing.
#include <gtest/gtest.h>
#include <sys/resource.h>

#include <csignal>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "backends/device_registry.h"
#include "llm/context.h"
#include "llm/device_weights.h"
#include "llm/device_residency_suite.h"
#include "llm/model_test_util.h"
#include "runtime/planner.h"
#include "temp_dir.h"

namespace kiln {
namespace {

using namespace kiln::test;

TEST(Residency, FiftyEvictRestoreCyclesOnSimGiveIdenticalLogitsAtNewAddresses) { fifty_cycles_on_device("sim0", ""); }

TEST(Residency, TwoModelsTakeTurnsOnABudgetThatHoldsOne) { two_models_take_turns("sim0", 25); }

TEST(Residency, FiftyEvictRestoreCyclesOnSimThroughASwapFileGiveIdenticalLogits) {
  TempDir dir("kiln-swap");
  fifty_cycles_on_device("sim0", dir.path());
  EXPECT_EQ(open_files_in(dir.path()), 0);
  EXPECT_TRUE(dir_empty(dir.path()));
}

// 50 evictions and restores on the CPU in the middle of a generation. Without `swap_dir` the KV
// cache stays (its copy would take the same RAM) and stays counted; with it, it goes to a file
// there, is no longer counted, and comes back bit for bit.
void fifty_cycles_on_the_cpu(const std::string& swap_dir) {
  auto model = load(model_path("llama-spm-e256-Q4_0.gguf"));
  ASSERT_TRUE(model);
  const std::vector<float> reference = uninterrupted(model, "cpu");
  auto devices = make_devices(4 * kMiB, {}, swap_dir);
  Device& cpu = devices->cpu();
  ResidencyManager& manager = devices->residency(cpu);
  OnDevice o = place(*devices, "cpu", model, kOpt);
  ASSERT_TRUE(o.ctx);
  const OwnerId owner = o.weights->owner();
  const size_t kv_bytes = o.ctx->kv().bytes();
  std::unique_ptr<Buffer> spacer;
  const auto logits = generate(*o.ctx, [&](int step) {
    const size_t before = manager.used();
    const Status st = manager.evict_owner(owner);
    ASSERT_TRUE(st.ok()) << st.error().message;
    // The mapped weights' pages are dropped and the compute memory freed.
    ASSERT_FALSE(manager.owner_resident(owner));
    ASSERT_LT(manager.used(), before);
    if (swap_dir.empty()) {
      ASSERT_GE(manager.used(), kv_bytes);
      ASSERT_EQ(o.ctx->kv().bytes(), kv_bytes);
    } else {
      ASSERT_LE(manager.used() + kv_bytes, before);  // the KV cache is no longer counted
      ASSERT_EQ(o.ctx->kv().bytes(), 0u);
      ASSERT_EQ(open_files_in(swap_dir), 1);
    }
    spacer.reset();
    auto s = cpu.allocate({(1 + static_cast<size_t>(step % 2)) * kMiB / 4, MemoryKind::Compute, "spacer"});
    ASSERT_TRUE(s.ok()) << s.error().message;
    spacer = std::move(*s);
  });
  EXPECT_TRUE(same_bits(logits, reference)) << "logits after eviction and restore differ";
  EXPECT_TRUE(manager.owner_resident(owner));
  // The host KV cache left and came back at every cycle only with a swap directory.
  EXPECT_EQ(o.ctx->kv().generation(), swap_dir.empty() ? 0u : static_cast<uint64_t>(kSteps));
}

TEST(Residency, FiftyEvictRestoreCyclesOnTheCpuGiveIdenticalLogits) { fifty_cycles_on_the_cpu(""); }

TEST(Residency, FiftyEvictRestoreCyclesOnTheCpuThroughASwapFileGiveIdenticalLogits) {
  TempDir dir("kiln-swap");
  fifty_cycles_on_the_cpu(dir.path());
  EXPECT_EQ(open_files_in(dir.path()), 0);
  EXPECT_TRUE(dir_empty(dir.path()));
}

// A swap file that cannot be written (here: RLIMIT_FSIZE, as a full disk would) fails the eviction
// with the reason; the KV cache stays where it was and the generation goes on unchanged.
TEST(Residency, ASwapFileThatCannotBeWrittenFailsTheEvictionAndLosesNothing) {
  auto model = load(model_path("llama-spm-e256-Q4_0.gguf"));
  ASSERT_TRUE(model);
  const std::vector<float> reference = uninterrupted(model, "cpu");
  TempDir dir("kiln-swap");
  auto devices = make_devices(4 * kMiB, {}, dir.path());
  ResidencyManager& manager = devices->residency(devices->cpu());
  OnDevice o = place(*devices, "cpu", model, kOpt);
  ASSERT_TRUE(o.ctx);
  const size_t kv_bytes = o.ctx->kv().bytes();
  const auto logits = generate(*o.ctx, [&](int step) {
    if (step != 3) return;
    rlimit saved{};
    ASSERT_EQ(getrlimit(RLIMIT_FSIZE, &saved), 0);
    const auto old_handler = std::signal(SIGXFSZ, SIG_IGN);  // write() fails with EFBIG instead
    rlimit small = saved;
    small.rlim_cur = 4096;
    ASSERT_EQ(setrlimit(RLIMIT_FSIZE, &small), 0);
    const Status st = manager.evict_owner(o.weights->owner());
    setrlimit(RLIMIT_FSIZE, &saved);
    std::signal(SIGXFSZ, old_handler);
    ASSERT_FALSE(st.ok());
    EXPECT_NE(st.error().message.find("--swap-dir " + dir.path() + ": cannot write the KV cache"), std::string::npos)
        << st.error().message;
    EXPECT_NE(st.error().message.find(std::strerror(EFBIG)), std::string::npos) << st.error().message;
    EXPECT_EQ(o.ctx->kv().bytes(), kv_bytes);
    EXPECT_EQ(o.ctx->kv().generation(), 0u);
    EXPECT_EQ(open_files_in(dir.path()), 0);
  });
  EXPECT_TRUE(same_bits(logits, reference)) << "logits after a failed eviction differ";
}

TEST(Residency, ASwapDirThatCannotHoldFilesIsRefused) {
  TempDir dir("kiln-swap");
  const std::string missing = dir.path() + "/missing";
  DeviceRegistryOptions options;
  options.swap_dir = missing;
  auto r = DeviceRegistry::create(options);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().message, "--swap-dir " + missing + ": " + std::strerror(ENOENT));
  const std::string file = dir.path() + "/file";
  std::ofstream(file) << "x";
  options.swap_dir = file;
  r = DeviceRegistry::create(options);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().message, "--swap-dir " + file + ": not a directory");
}

// The device's compute arena (DeviceRegistry::arena) is a resident of an owner of its own: counted
// once under it, left in place when the model is evicted, released when its own owner is, and
// allocated again by the next pass (which pins it).
TEST(Residency, TheDevicesArenaIsAResidentOfItsOwnOwner) {
  auto model = load(model_path("llama-spm-e256-Q4_0.gguf"));
  ASSERT_TRUE(model);
  const std::vector<float> reference = uninterrupted(model, "sim0");
  auto devices = make_devices(64 * kMiB);
  SimDevice& sim = sim_of(*devices);
  ResidencyManager& manager = devices->residency(sim);
  auto weights = DeviceWeights::create(model, sim);
  ASSERT_TRUE(weights.ok()) << weights.error().message;
  const OwnerId owner = (*weights)->owner();
  ComputeArena& arena = devices->arena(sim);
  EXPECT_EQ(&devices->arena(sim), &arena) << "one arena per device";
  const OwnerId arena_owner = arena.resident_owner();
  ASSERT_NE(arena_owner, 0u);
  ASSERT_NE(arena_owner, owner);
  ContextOptions opt = kOpt;
  opt.arena = &arena;
  auto ctx = Context::create(*weights, devices->backend(sim), opt);
  ASSERT_TRUE(ctx.ok()) << ctx.error().message;
  auto compute_bytes = [&](OwnerId who) {
    for (const OwnerMemory& om : manager.breakdown().owners)
      if (om.owner == who) return om.bytes[static_cast<int>(MemoryKind::Compute)];
    return size_t{0};
  };
  const auto logits = generate(**ctx, [&](int step) {
    const size_t arena_bytes = arena.allocated_bytes();
    ASSERT_GT(arena_bytes, 0u) << "step " << step << ": the decode before restores the arena";
    // Counted under its own owner, once (nothing of the device is unaccounted for)...
    ASSERT_GE(compute_bytes(arena_owner), arena_bytes);
    ASSERT_LT(compute_bytes(owner), arena_bytes);  // the model's own compute: its input buffer
    ASSERT_EQ(manager.breakdown().unaccounted, 0u);
    // ... not the model's: evicting the model leaves it...
    Status st = manager.evict_owner(owner);
    ASSERT_TRUE(st.ok()) << st.error().message;
    ASSERT_EQ(arena.allocated_bytes(), arena_bytes);
    // ... and its own owner's eviction releases it.
    const size_t used = manager.used();
    st = manager.evict_owner(arena_owner);
    ASSERT_TRUE(st.ok()) << st.error().message;
    ASSERT_EQ(arena.allocated_bytes(), 0u);
    ASSERT_LE(manager.used() + arena_bytes, used);
  });
  EXPECT_TRUE(same_bits(logits, reference)) << "logits in an evicted and restored device arena differ";
}

// Bytes model `path` takes on a sim0 of its own (weights, KV, compute, and the backend's scratch).

TEST(Residency, APinnedOwnerIsNotEvictedAndTheRequestIsRefusedWithTheNumbers) {
  auto a = load(model_path("llama-spm-e256-Q4_0.gguf"));
  auto b = load(model_path("qwen2-e64-Q8_0.gguf"));
  ASSERT_TRUE(a && b);
  const size_t budget = std::max(footprint(a, "sim0"), footprint(b, "sim0")) + kMiB / 2;
  const double gib = static_cast<double>(budget) / static_cast<double>(size_t{1} << 30);
  auto devices = make_devices(256 * kMiB, {{.device = "sim0", .gib = gib}});
  SimDevice& sim = sim_of(*devices);
  ResidencyManager& manager = devices->residency(sim);
  OnDevice oa = place(*devices, "sim0", a, kOpt);
  OnDevice ob = place(*devices, "sim0", b, kOpt);
  ASSERT_TRUE(oa.ctx && ob.ctx);
  auto pin = manager.pin(ob.weights->owner());  // b is in the middle of a request
  ASSERT_TRUE(pin.ok()) << pin.error().message;
  Batch batch;
  batch.add(1, 0, 0, true);
  const Status st = oa.ctx->decode(batch);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.error().message.find("sim0: out of memory for"), std::string::npos) << st.error().message;
  EXPECT_NE(st.error().message.find("budget " + format_memory_size(budget)), std::string::npos)
      << st.error().message;
  EXPECT_TRUE(manager.owner_resident(ob.weights->owner()));
  pin->reset();
  std::vector<float> out;
  decode(*oa.ctx, {1}, 0, 0, true, out);  // b is evictable again
  EXPECT_FALSE(manager.owner_resident(ob.weights->owner()));
}

TEST(Residency, WeightsAboveTheBudgetAreRefusedAtLoadWithNothingAllocated) {
  auto model = load(model_path("llama-spm-e256-Q4_0.gguf"));
  ASSERT_TRUE(model);
  auto devices = make_devices(256 * kMiB, {{.device = "sim0", .gib = 0.004}});  // 4 MiB < 12 MiB of weights
  SimDevice& sim = sim_of(*devices);
  auto w = DeviceWeights::create(model, sim);
  ASSERT_FALSE(w.ok());
  EXPECT_NE(w.error().message.find("more than the budget of 4.10 MiB"), std::string::npos)
      << w.error().message;
  EXPECT_EQ(sim.memory_info().free, sim.memory_info().total);
  EXPECT_EQ(devices->residency(sim).used(), 0u);

  // On the CPU the mapped weights count: a budget below them refuses the model too.
  auto w_cpu = DeviceWeights::create(model, devices->cpu());
  ASSERT_TRUE(w_cpu.ok()) << w_cpu.error().message;  // no CPU budget
  auto small = make_devices(kMiB, {{.device = "cpu", .gib = 0.004}});
  auto refused = DeviceWeights::create(model, small->cpu());
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.error().message.find("more than the budget"), std::string::npos) << refused.error().message;
  EXPECT_EQ(small->residency(small->cpu()).used(), 0u);
}

// Without a budget the host's available memory is the limit: a context whose KV cache no machine
// holds (2^31 cells: terabytes) is refused through the manager's admission, with the sizes in GiB,
// before anything is allocated; a context of a normal size is admitted on the same device.
TEST(Residency, AContextLargerThanTheHostsMemoryIsRefusedBeforeAnythingIsAllocated) {
  auto model = load(model_path("llama-spm-e256-Q4_0.gguf"));
  ASSERT_TRUE(model);
  auto devices = make_devices(kMiB);
  CpuDevice& cpu = devices->cpu();
  auto weights = DeviceWeights::create(model, cpu);
  ASSERT_TRUE(weights.ok()) << weights.error().message;
  const uint64_t allocations = cpu.allocation_count();
  const size_t counted = devices->residency(cpu).used();
  ContextOptions huge = kOpt;
  huge.n_ctx = INT32_MAX;
  auto refused = Context::create(*weights, devices->backend(cpu), huge);
  ASSERT_FALSE(refused.ok());
  const std::string& msg = refused.error().message;
  const std::string kv = format_memory_size(KvCache::bytes_for(model->hparams(), INT32_MAX, DType::F16, DType::F16));
  EXPECT_EQ(kv.substr(kv.size() - 3), "GiB");
  EXPECT_EQ(msg.rfind("cpu: out of memory for '" + model->name() + "' (a context of 2147483647 tokens: KV cache " + kv +
                          ", inputs ",
                      0),
            0u)
      << msg;
  EXPECT_NE(msg.find(" GiB needed, "), std::string::npos) << msg;
  EXPECT_NE(msg.find(" GiB available (no budget; "), std::string::npos) << msg;
  EXPECT_EQ(cpu.allocation_count(), allocations);
  EXPECT_EQ(devices->residency(cpu).used(), counted);

  auto normal = Context::create(*weights, devices->backend(cpu), kOpt);
  EXPECT_TRUE(normal.ok()) << normal.error().message;
}

}  // namespace
}  // namespace kiln
