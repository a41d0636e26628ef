// Models split over several devices (llm/layer_split.h, runtime/graph_split.h): -ngl 0, 1, half
// and all over sim0 + cpu, -ts over sim0 + sim1, -ot moving the FFN matrices to the CPU. The sim
// devices compute with the CPU's kernels, so every logit must equal the one-device CPU run bit for
// bit, on every path (prompt, generation, KV compaction and shift, state files); the placement
// follows llama.cpp's rules; a split model evicted and restored gives the same logits.
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>

#include "backends/device_registry.h"
#include "llm/context.h"
#include "llm/layer_split.h"
#include "llm/model_test_util.h"
#include "test_data.h"

namespace kiln {
namespace {

using namespace kiln::test;

std::unique_ptr<DeviceRegistry> two_sims(std::vector<DeviceBudget> budgets = {}) {
  auto r = DeviceRegistry::create({.n_threads = 2,
                                   .sim = {{.name = "sim0", .capacity = size_t{256} << 20},
                                           {.name = "sim1", .capacity = size_t{256} << 20}},
                                   .budgets = std::move(budgets)});
  EXPECT_TRUE(r.ok()) << r.error().message;
  return r.ok() ? std::move(*r) : nullptr;
}

struct Case {
  std::string what;
  SplitOptions options;
  size_t devices;  // devices the split must use
};

std::vector<Case> cases(DeviceRegistry& r, int64_t n_layer) {
  Device* sim0 = *r.find("sim0");
  Device* sim1 = *r.find("sim1");
  std::vector<Case> out;
  out.push_back({"-ngl 1 (the output layer)", {.offload = {sim0}, .n_gpu_layers = 1}, 2});
  out.push_back({"-ngl half", {.offload = {sim0}, .n_gpu_layers = (n_layer + 1) / 2}, 2});
  out.push_back({"-ngl all", {.offload = {sim0}}, 2});
  // Over two sim devices, each given at least one of the fixtures' (2 or more) layers.
  out.push_back({"-ts 1,3", {.offload = {sim0, sim1}, .tensor_split = {1, 3}}, 3});
  out.push_back({"-ts 1,1 -ngl n_layer", {.offload = {sim0, sim1}, .n_gpu_layers = n_layer, .tensor_split = {1, 1}}, 3});
  out.push_back({"-ot ffn=cpu", {.offload = {sim0}, .overrides = {{"ffn_(up|down|gate)", &r.cpu()}}}, 2});
  return out;
}

// -nkvo: the K/V of every layer in host memory, the layers on sim0.
TEST(LayerSplit, KvOnTheHostGivesTheSameLogits) {
  auto model = load(fixture_models().front());
  ASSERT_TRUE(model);
  auto r = two_sims();
  ASSERT_TRUE(r);
  ContextOptions opt{.n_ctx = 64, .n_batch = 64, .n_ubatch = 8};
  OnDevice cpu = place(*r, "cpu", model, opt);
  ASSERT_TRUE(cpu.ctx);
  const auto want = prompt_and_generation(*cpu.ctx);
  opt.kv_on_host = true;
  SplitContext s = place_split_context(*r, model, {.offload = {*r->find("sim0")}}, opt);
  ASSERT_TRUE(s.ctx);
  EXPECT_EQ((*r->find("sim0"))->allocated_bytes(MemoryKind::Kv), 0u);
  EXPECT_GT(r->cpu().allocated_bytes(MemoryKind::Kv), 0u);
  EXPECT_TRUE(same_bits(want, prompt_and_generation(*s.ctx)));
}

class SplitMatchesCpu : public ::testing::TestWithParam<std::string> {};

TEST_P(SplitMatchesCpu, LogitsAreBitIdentical) {
  auto model = load(GetParam());
  ASSERT_TRUE(model);
  auto r = two_sims();
  ASSERT_TRUE(r);
  const ContextOptions opt{.n_ctx = 64, .n_batch = 64, .n_ubatch = 8};
  const std::string path = ::testing::TempDir() + "/split-" + std::to_string(getpid()) + ".state";
  OnDevice cpu = place(*r, "cpu", model, opt);
  ASSERT_TRUE(cpu.ctx);
  const auto want = prompt_and_generation(*cpu.ctx);
  cpu.ctx->clear();
  const auto want_edits = edits_and_state(*cpu.ctx, path);
  for (const Case& c : cases(*r, model->hparams().n_layer)) {
    SplitContext s = place_split_context(*r, model, c.options, opt);
    ASSERT_TRUE(s.ctx) << c.what;
    EXPECT_EQ(s.weights.size(), c.devices) << c.what;
    EXPECT_TRUE(same_bits(want, prompt_and_generation(*s.ctx))) << c.what;
    s.ctx->clear();
    EXPECT_TRUE(same_bits(want_edits, edits_and_state(*s.ctx, path))) << c.what;
  }
  std::filesystem::remove(path);
}

INSTANTIATE_TEST_SUITE_P(Models, SplitMatchesCpu, ::testing::ValuesIn(fixture_models()), model_param_name);

// llama.cpp's placement: the input layer on the CPU, the last -ngl of n_layer + 1 layers offloaded,
// spread by -ts in device order; -sm none puts them all on -mg; an override wins over its layer.
TEST(LayerSplit, PlacesLayersAsLlamaCpp) {
  auto r = two_sims();
  ASSERT_TRUE(r);
  Device* sim0 = *r->find("sim0");
  Device* sim1 = *r->find("sim1");
  HParams hp;
  hp.n_layer = 8;
  auto one = LayerSplit::make(hp, {.offload = {sim0}, .n_gpu_layers = 3}, r->cpu());
  ASSERT_TRUE(one.ok());
  EXPECT_EQ(one->device_of(kInputLayer, "token_embd.weight"), &r->cpu());
  for (int64_t il = 0; il < 6; ++il) EXPECT_EQ(one->device_of(il, "blk.x"), &r->cpu()) << il;
  for (int64_t il = 6; il <= 8; ++il) EXPECT_EQ(one->device_of(il, "blk.x"), sim0) << il;
  EXPECT_EQ(one->describe(8), "layers 6-7 and the output layer on sim0; layers 0-5 on cpu");

  auto two = LayerSplit::make(hp, {.offload = {sim0, sim1}, .tensor_split = {1, 2}}, r->cpu());
  ASSERT_TRUE(two.ok());
  // Split points 1/3 and 1: layers il / 9 < 1/3 (0, 1, 2) on sim0, the rest on sim1.
  for (int64_t il = 0; il <= 8; ++il) EXPECT_EQ(two->device_of(il, "blk.x"), il < 3 ? sim0 : sim1) << il;

  auto none = LayerSplit::make(hp, {.offload = {sim0, sim1}, .mode = SplitMode::None, .main_device = 1}, r->cpu());
  ASSERT_TRUE(none.ok());
  for (int64_t il = 0; il <= 8; ++il) EXPECT_EQ(none->device_of(il, "blk.x"), sim1) << il;

  auto ot = LayerSplit::make(hp, {.offload = {sim0}, .overrides = {{"blk\\.[0-3]\\.ffn", &r->cpu()}}}, r->cpu());
  ASSERT_TRUE(ot.ok());
  EXPECT_EQ(ot->device_of(2, "blk.2.ffn_up.weight"), &r->cpu());
  EXPECT_EQ(ot->device_of(2, "blk.2.attn_q.weight"), sim0);
  EXPECT_EQ(ot->device_of(5, "blk.5.ffn_up.weight"), sim0);

  EXPECT_FALSE(LayerSplit::make(hp, {.offload = {sim0}, .tensor_split = {1, 1}}, r->cpu()).ok());
  EXPECT_FALSE(LayerSplit::make(hp, {.offload = {sim0}, .main_device = 1}, r->cpu()).ok());
  const auto bad = LayerSplit::make(hp, {.offload = {sim0}, .overrides = {{"ffn_(", &r->cpu()}}}, r->cpu());
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message.find("-ot ffn_("), std::string::npos) << bad.error().message;
}

// A split model's memory on each device is its own resident: evicting every owner on both sim
// devices and restoring them (the next decode pins and restores) gives the same logits, 50
// cycles, and each device holds only its share.
TEST(LayerSplit, EvictedAndRestoredSplitModelGivesTheSameLogits) {
  auto model = load(fixture_models().front());
  ASSERT_TRUE(model);
  auto r = two_sims();
  ASSERT_TRUE(r);
  const ContextOptions opt{.n_ctx = 64, .n_batch = 64, .n_ubatch = 8};
  SplitContext s = place_split_context(*r, model, {.offload = {*r->find("sim0"), *r->find("sim1")}, .tensor_split = {1, 3}}, opt);
  ASSERT_TRUE(s.ctx);
  ASSERT_EQ(s.weights.size(), 3u);
  const size_t kv_total = KvCache::bytes_for(model->hparams(), 64, DType::F16, DType::F16);
  const Device& sim0 = **r->find("sim0");
  EXPECT_GT(sim0.allocated_bytes(MemoryKind::Kv), 0u);
  EXPECT_LT(sim0.allocated_bytes(MemoryKind::Kv), kv_total) << "sim0 holds only its layers' K and V";
  const auto want = prompt_and_generation(*s.ctx);
  for (int cycle = 0; cycle < 50; ++cycle) {
    for (const auto& w : s.weights) {
      ResidencyManager& m = r->residency(w->device());
      if (w->device().is_host()) continue;
      ASSERT_TRUE(m.evict_owner(w->owner()).ok());
      EXPECT_FALSE(w->resident());
    }
    EXPECT_EQ(sim0.allocated_bytes(MemoryKind::Kv), 0u);
    s.ctx->clear();
    EXPECT_TRUE(same_bits(want, prompt_and_generation(*s.ctx))) << "cycle " << cycle;
  }
}

}  // namespace
}  // namespace kiln
