// How weights are held on the host (WeightOptions: --no-mmap, --mlock): the logits equal those of
// weights read in place from the mapped file, bit for bit, before and after evict/restore cycles;
// copied weights are counted as a buffer that eviction frees; locked weights show in VmLck while
// resident and leave it when evicted.
#include <gtest/gtest.h>

#include <fstream>
#include <string>

#include "backends/device_registry.h"
#include "llm/context.h"
#include "llm/device_weights.h"
#include "llm/model_test_util.h"

namespace kiln {
namespace {

using namespace kiln::test;

constexpr size_t kMiB = size_t{1} << 20;
const ContextOptions kOpt{.n_ctx = 64, .n_batch = 32, .n_ubatch = 16};

// VmLck of this process in KiB (/proc/self/status); -1 when absent.
int64_t locked_kib() {
  std::ifstream in("/proc/self/status");
  for (std::string line; std::getline(in, line);) {
    if (line.starts_with("VmLck:")) return std::stoll(line.substr(6));
  }
  return -1;
}

// Logits of a 12-token prompt and 8 greedy steps on the CPU with `options`; before steps 2, 4 and
// 6 the model is evicted when `evict`, and `check_evicted` runs while it is.
template <typename Check>
std::vector<float> run(const std::shared_ptr<const Model>& model, const WeightOptions& options, bool evict,
                       Check check_evicted) {
  auto devices = make_devices(4 * kMiB);
  Device& cpu = devices->cpu();
  ResidencyManager& manager = devices->residency(cpu);
  auto w = DeviceWeights::create(model, cpu, options);
  EXPECT_TRUE(w.ok()) << w.error().message;
  if (!w.ok()) return {};
  auto c = Context::create(*w, devices->backend(cpu), kOpt);
  EXPECT_TRUE(c.ok()) << c.error().message;
  if (!c.ok()) return {};
  Context& ctx = **c;
  std::vector<float> out;
  const auto prompt = spread_tokens(ctx, 12);
  decode(ctx, prompt, 0, 0, false, out);
  int32_t pos = static_cast<int32_t>(prompt.size());
  for (int step = 0; step < 8; ++step) {
    if (evict && step % 2 == 0 && step > 0) {
      const size_t before = manager.used();
      const Status st = manager.evict_owner((*w)->owner());
      EXPECT_TRUE(st.ok()) << st.error().message;
      check_evicted(**w, before, manager.used());
    }
    decode(ctx, {argmax({out.end() - ctx.n_vocab(), out.end()})}, pos++, 0, false, out);
  }
  return out;
}

TEST(WeightOptions, NoMmapCopiesEveryTensorAndGivesTheMappedLogits) {
  auto model = load(model_path("llama-spm-e256-Q4_0.gguf"));
  ASSERT_TRUE(model);
  const auto mapped = run(model, {}, false, [](const DeviceWeights&, size_t, size_t) {});
  ASSERT_FALSE(mapped.empty());
  int evictions = 0;
  WeightOptions copy_all;
  copy_all.copy_all = true;
  const auto copied = run(model, copy_all, true, [&](const DeviceWeights& w, size_t before, size_t after) {
    ++evictions;
    EXPECT_EQ(w.mapped_bytes(), 0u);  // nothing read in place from the mapping
    EXPECT_FALSE(w.resident());
    EXPECT_EQ(w.buffer(), nullptr);
    EXPECT_GE(before - after, w.buffer_bytes()) << "the copy was not freed";
  });
  EXPECT_EQ(evictions, 3);
  EXPECT_TRUE(same_bits(copied, mapped)) << "--no-mmap changed the logits";
}

TEST(WeightOptions, MlockLocksTheWeightsWhileResident) {
  auto model = load(model_path("llama-spm-e256-Q4_0.gguf"));
  ASSERT_TRUE(model);
  const auto mapped = run(model, {}, false, [](const DeviceWeights&, size_t, size_t) {});
  const int64_t baseline = locked_kib();
  ASSERT_GE(baseline, 0);
  for (bool copy_all : {false, true}) {
    int failures = 0;
    const WeightOptions options{.copy_all = copy_all, .lock = true, .on_lock_failure = [&](const std::string& m) {
                                  ++failures;
                                  ADD_FAILURE() << m;
                                }};
    auto devices = make_devices(4 * kMiB);
    Device& cpu = devices->cpu();
    auto w = DeviceWeights::create(model, cpu, options);
    ASSERT_TRUE(w.ok()) << w.error().message;
    const int64_t weight_kib = static_cast<int64_t>(((*w)->buffer_bytes() + (*w)->mapped_bytes()) / 1024);
    ASSERT_GT(weight_kib, 0);
    EXPECT_GE(locked_kib() - baseline, weight_kib * 9 / 10) << "copy_all " << copy_all;
    ResidencyManager& manager = devices->residency(cpu);
    ASSERT_TRUE(manager.evict_owner((*w)->owner()).ok());
    EXPECT_EQ(locked_kib(), baseline) << "evicted weights stayed locked";
    auto pin = manager.pin((*w)->owner());
    ASSERT_TRUE(pin.ok()) << pin.error().message;
    EXPECT_GE(locked_kib() - baseline, weight_kib * 9 / 10) << "restored weights are not locked";
    EXPECT_EQ(failures, 0);
  }
  EXPECT_EQ(locked_kib(), baseline);
  // And the logits are the unlocked ones, through evictions.
  WeightOptions lock;
  lock.lock = true;
  const auto locked = run(model, lock, true, [](const DeviceWeights&, size_t, size_t) {});
  EXPECT_TRUE(same_bits(locked, mapped));
}

}  // namespace
}  // namespace kiln
