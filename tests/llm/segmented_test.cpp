// Segmented execution (llm/context.h): a model's layers streamed through sim0, one segment per layer,
// on a budget that cannot hold them all. sim0 computes with the CPU's kernels, so every logit must
// equal the one-device CPU run bit for bit (prompt, generation, KV edits, shift and state files),
// with and without prefetch; segments are evicted and restored within each pass, and the device's
// peak stays within its budget. fit_segment_layers sizes segments to a device's room.
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>

#include "backends/device_registry.h"
#include "backends/sim/sim_device.h"
#include "llm/context.h"
#include "llm/layer_split.h"
#include "llm/model_placement.h"
#include "llm/model_test_util.h"
#include "llm/placement_fit.h"
#include "llm/segmented_suite.h"
#include "test_data.h"

namespace kiln {
namespace {

using namespace kiln::test;

// Streams `model` through sim0 on a budget for `window` segments (one layer each) beside what stays
// there, with and without prefetch: the CPU run's bits, sim0's peak within the budget, and (more
// layers than the window) segments evicted within each pass.
void expect_streamed_equals_cpu(const std::string& path, size_t window) {
  auto model = load(path);
  ASSERT_TRUE(model);
  const ContextOptions opt{.n_ctx = 64, .n_batch = 64, .n_ubatch = 8};
  const Sizes sz = sizes_on(model, opt, "sim0");
  ASSERT_GT(sz.largest_layer, 0u);
  const size_t budget = sz.stays + window * sz.largest_layer + kSegmentSlack;
  auto r = with_budget("sim0", budget);
  ASSERT_TRUE(r);
  const std::string state = ::testing::TempDir() + "/segmented-" + std::to_string(getpid()) + ".state";
  OnDevice cpu = place(*r, "cpu", model, opt);
  ASSERT_TRUE(cpu.ctx);
  const auto want = prompt_and_generation(*cpu.ctx);
  cpu.ctx->clear();
  const auto want_edits = edits_and_state(*cpu.ctx, state);
  auto* sim0 = dynamic_cast<SimDevice*>(*r->find("sim0"));
  ASSERT_NE(sim0, nullptr);
  const int64_t n_layer = model->hparams().n_layer;
  for (const bool prefetch : {true, false}) {
    ContextOptions o = opt;
    o.prefetch_segments = prefetch;
    SplitContext s = place_split_context(*r, model, blocks_on(*r, "sim0"), o, {{sim0, 1}});
    ASSERT_TRUE(s.ctx) << "prefetch " << prefetch;
    ASSERT_EQ(s.ctx->device_weights().size(), 2 + static_cast<size_t>(n_layer)) << "cpu, sim0 and a segment per layer";
    sim0->reset_peak_used();
    EXPECT_TRUE(same_bits(want, prompt_and_generation(*s.ctx))) << "prefetch " << prefetch;
    if (n_layer > static_cast<int64_t>(window)) {
      EXPECT_LE(resident_segments(*s.ctx, "sim0"), window) << "segments done were evicted to make room";
    }
    s.ctx->clear();
    EXPECT_TRUE(same_bits(want_edits, edits_and_state(*s.ctx, state))) << "prefetch " << prefetch;
    EXPECT_LE(sim0->peak_used(), budget) << "prefetch " << prefetch;
  }
  std::filesystem::remove(state);
}

class SegmentedMatchesCpu : public ::testing::TestWithParam<std::string> {};

// One segment at a time: every fixture model; the prefetch finds no room and each segment is restored
// when its part runs.
TEST_P(SegmentedMatchesCpu, OneSegmentAtATime) { expect_streamed_equals_cpu(GetParam(), 1); }

INSTANTIATE_TEST_SUITE_P(Models, SegmentedMatchesCpu, ::testing::ValuesIn(fixture_models()), model_param_name);

// The same through sim0 against the layers held whole on sim0 (what the Vulkan tests run on vulkan0).
TEST(Segmented, LayersStreamedGiveTheBitsOfTheLayersHeldWhole) { streamed_equals_whole("sim0"); }

// Six layers through a window of two segments: the next segment is restored while one computes, the
// one done last is evicted first.
TEST(Segmented, SixLayersThroughAWindowOfTwo) {
  expect_streamed_equals_cpu(test_data::path("segmented/llama-spm-e64-l6.gguf"), 2);
}

// Evicting every segment (and the rest) between passes, as a server evicting an idle model does,
// changes nothing.
TEST(Segmented, EvictedBetweenPassesGivesTheSameLogits) {
  auto model = load(test_data::path("segmented/llama-spm-e64-l6.gguf"));
  ASSERT_TRUE(model);
  const ContextOptions opt{.n_ctx = 64, .n_batch = 64, .n_ubatch = 8};
  const Sizes sz = sizes_on(model, opt, "sim0");
  auto r = with_budget("sim0", sz.stays + 2 * sz.largest_layer + kSegmentSlack);
  ASSERT_TRUE(r);
  SplitContext s = place_split_context(*r, model, blocks_on(*r, "sim0"), opt, {{*r->find("sim0"), 2}});
  ASSERT_TRUE(s.ctx);
  const auto want = prompt_and_generation(*s.ctx);
  for (int cycle = 0; cycle < 3; ++cycle) {
    for (const auto& w : s.ctx->device_weights()) {
      if (w->device().is_host()) continue;
      ASSERT_TRUE(r->residency(w->device()).evict_owner(w->owner()).ok());
    }
    s.ctx->clear();
    EXPECT_TRUE(same_bits(want, prompt_and_generation(*s.ctx))) << "cycle " << cycle;
  }
}

// The segment size fit chooses: the most layers per segment whose two segments fit beside what stays;
// none when the share fits whole; an Error naming the sizes when one layer does not.
TEST(Segmented, FitChoosesTheSegmentSize) {
  auto model = load(test_data::path("segmented/llama-spm-e64-l6.gguf"));
  ASSERT_TRUE(model);
  const ContextOptions opt{.n_ctx = 64, .n_batch = 64, .n_ubatch = 8};
  const Sizes sz = sizes_on(model, opt, "sim0");
  auto r = with_budget("sim0", size_t{64} << 20);
  ASSERT_TRUE(r);
  Device& sim0 = **r->find("sim0");
  auto split = LayerSplit::make(model->hparams(), blocks_on(*r, "sim0"), r->cpu());
  ASSERT_TRUE(split.ok());
  const auto per = [&](size_t room) { return fit_segment_layers(*model, *split, sim0, opt, {}, room); };
  const size_t L = sz.largest_layer, pad = 1024;  // the six layers are alike; pad: alignment
  EXPECT_EQ(*per(size_t{64} << 20), 0) << "the whole share fits";
  EXPECT_EQ(*per(sz.stays + 2 * L + pad), 1);
  EXPECT_EQ(*per(sz.stays + 4 * L + pad), 2);
  EXPECT_EQ(*per(sz.stays + 6 * L - pad), 2) << "three layers per segment need the whole share twice over";
  const auto none = per(sz.stays + sz.largest_layer);
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.error().message.find("two segments of one layer"), std::string::npos) << none.error().message;
}

// Fit's last resort: when no placement of whole layers fits (sim0 cannot hold the model, the CPU's
// budget cannot take the rest), the whole model is streamed through sim0 instead of refused, and
// the line says why; --fit off leaves it whole.
TEST(Segmented, FitStreamsWhenNoPlacementOfWholeLayersFits) {
  auto model = load(test_data::path("segmented/llama-spm-e64-l6.gguf"));
  ASSERT_TRUE(model);
  const ContextOptions opt{.n_ctx = 64, .n_batch = 64, .n_ubatch = 8};
  // The whole model on sim0: what stays there is the token embedding and the output layer too.
  auto roomy = with_budget("sim0", 0);
  ASSERT_TRUE(roomy);
  Device& sim0_roomy = **roomy->find("sim0");
  auto whole = LayerSplit::make(model->hparams(), {.offload = {&sim0_roomy}, .overrides = {{".*", &sim0_roomy}}},
                                roomy->cpu());
  ASSERT_TRUE(whole.ok());
  auto est = estimate_placement(*model, *whole, opt, {}, nullptr);
  ASSERT_TRUE(est.ok()) << est.error().message;
  const Sizes sz = sizes_on(model, opt, "sim0");
  const size_t budget = est->front().total() - 2 * sz.largest_layer;  // four of the six layers
  auto r = DeviceRegistry::create({.n_threads = 2,
                                   .sim = {{.name = "sim0", .capacity = size_t{256} << 20}},
                                   .budgets = {{"sim0", static_cast<double>(budget) / (1 << 30)},
                                               {"cpu", 1.0 / 1024}}});  // 1 MiB: nothing fits there
  ASSERT_TRUE(r.ok()) << r.error().message;
  SplitFlags flags{.devices = {"sim0"}};
  auto plan = plan_placement(flags, "sim0", **r, *model, opt, {}, false);
  ASSERT_TRUE(plan.ok()) << plan.error().message;
  EXPECT_EQ(plan->segments.size(), 1u);
  EXPECT_NE(plan->fit_summary.find("fit: the model does not fit"), std::string::npos) << plan->fit_summary;
  EXPECT_NE(plan->fit_summary.find("segmented instead: sim0 streams its layers in segments of 2"), std::string::npos)
      << plan->fit_summary;
  auto placed = place_model(model, *plan, "sim0", **r, {});
  ASSERT_TRUE(placed.ok()) << placed.error().message;
  ASSERT_EQ(placed->weights.size(), 1u);
  EXPECT_EQ(placed->weights[0]->segments().size(), 3u);
  flags.fit = false;
  auto off = plan_placement(flags, "sim0", **r, *model, opt, {}, false);
  ASSERT_TRUE(off.ok()) << off.error().message;
  EXPECT_TRUE(off->segments.empty()) << "--fit off: the model as the flags place it (whole), refused when allocated";
}

}  // namespace
}  // namespace kiln
