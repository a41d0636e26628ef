// Estimates and --fit (llm/placement_fit.h): for every fixture model, whole and split over sim
// devices, the estimate of each sim device is within 5% of what placing the model and creating its
// context then allocate there; fit keeps a model that fits whole, splits one that does not so that
// every device stays within its room, shrinks the context only when allowed, and names the sizes
// when nothing fits.
#include <gtest/gtest.h>

#include "backends/device_registry.h"
#include "llm/context.h"
#include "llm/layer_split.h"
#include "llm/model_test_util.h"
#include "llm/placement_fit.h"

namespace kiln {
namespace {

using namespace kiln::test;

std::unique_ptr<DeviceRegistry> sims(size_t capacity, std::vector<DeviceBudget> budgets = {}) {
  auto r = DeviceRegistry::create({.n_threads = 2,
                                   .sim = {{.name = "sim0", .capacity = capacity}, {.name = "sim1", .capacity = capacity}},
                                   .budgets = std::move(budgets)});
  EXPECT_TRUE(r.ok()) << r.error().message;
  return r.ok() ? std::move(*r) : nullptr;
}

size_t allocated(const Device& d) {
  size_t total = 0;
  for (MemoryKind k : {MemoryKind::Weights, MemoryKind::Kv, MemoryKind::Compute, MemoryKind::Scratch})
    total += d.allocated_bytes(k);
  return total;
}

// Places `model` as `so` says on a fresh registry and returns, per sim device used, the estimate and
// what was allocated there.
void expect_estimate_holds(const std::shared_ptr<const Model>& model, const std::function<SplitOptions(DeviceRegistry&)>& so,
                           const ContextOptions& opt, const std::string& what) {
  auto r = sims(size_t{512} << 20);
  ASSERT_TRUE(r);
  auto split = LayerSplit::make(model->hparams(), so(*r), r->cpu());
  ASSERT_TRUE(split.ok()) << split.error().message;
  auto est = estimate_placement(*model, *split, opt, {}, nullptr);
  ASSERT_TRUE(est.ok()) << est.error().message;
  const SplitContext placed = place_split_context(*r, model, so(*r), opt);
  ASSERT_TRUE(placed.ctx) << what;
  ASSERT_EQ(est->size(), placed.weights.size()) << what;
  for (const DeviceEstimate& e : *est) {
    if (e.device->is_host()) continue;  // the CPU's share is mostly the mapped file
    const double got = static_cast<double>(allocated(*e.device));
    const double want = static_cast<double>(e.total());
    EXPECT_NEAR(want / got, 1.0, 0.05) << what << " on " << e.device->name() << ": estimate " << e.total()
                                       << " bytes, allocated " << allocated(*e.device);
  }
}

class EstimateMatchesAllocation : public ::testing::TestWithParam<std::string> {};

TEST_P(EstimateMatchesAllocation, WithinFivePercent) {
  auto model = load(GetParam());
  ASSERT_TRUE(model);
  const int64_t n_layer = model->hparams().n_layer;
  for (const ContextOptions& opt : {ContextOptions{.n_ctx = 256, .n_batch = 64, .n_ubatch = 32},
                                    ContextOptions{.n_ctx = 1024, .n_batch = 512, .n_ubatch = 512}}) {
    const std::string ctx = " (n_ctx " + std::to_string(opt.n_ctx) + ")";
    expect_estimate_holds(model, [](DeviceRegistry& r) {
      Device* s0 = *r.find("sim0");
      return SplitOptions{.offload = {s0}, .overrides = {{".*", s0}}};
    }, opt, "whole on sim0" + ctx);
    expect_estimate_holds(model, [&](DeviceRegistry& r) {
      return SplitOptions{.offload = {*r.find("sim0")}, .n_gpu_layers = n_layer};
    }, opt, "-ngl n_layer" + ctx);
    expect_estimate_holds(model, [](DeviceRegistry& r) {
      return SplitOptions{.offload = {*r.find("sim0"), *r.find("sim1")}, .tensor_split = {1, 3}};
    }, opt, "-ts 1,3" + ctx);
  }
}

INSTANTIATE_TEST_SUITE_P(Models, EstimateMatchesAllocation, ::testing::ValuesIn(fixture_models()), model_param_name);

// The estimate of `model` on sim0 of a fresh registry placed as `so` says.
size_t sim0_estimate(const std::shared_ptr<const Model>& model, int64_t n_gpu_layers, bool whole,
                     const ContextOptions& opt) {
  auto r = sims(size_t{512} << 20);
  Device* s0 = *r->find("sim0");
  SplitOptions so{.offload = {s0}, .n_gpu_layers = n_gpu_layers};
  if (whole) so.overrides = {{".*", s0}};
  auto split = LayerSplit::make(model->hparams(), so, r->cpu());
  EXPECT_TRUE(split.ok());
  auto est = estimate_placement(*model, *split, opt, {}, nullptr);
  EXPECT_TRUE(est.ok());
  return est.ok() ? est->front().total() : 0;
}

double gib(size_t bytes) { return static_cast<double>(bytes) / static_cast<double>(size_t{1} << 30); }

// A budget that holds the whole model: nothing changes. One that holds all but layer 0 (and the
// token embedding): fit offloads exactly -ngl n_layer, and the run stays within the budget (the
// manager's count).
TEST(Fit, SplitsOnlyWhatDoesNotFit) {
  auto model = load(fixture_models().front());
  ASSERT_TRUE(model);
  const int64_t n_layer = model->hparams().n_layer;
  const ContextOptions opt{.n_ctx = 256, .n_batch = 64, .n_ubatch = 32};
  const size_t whole = sim0_estimate(model, SplitOptions::kAllLayers, true, opt);
  const size_t but_one = sim0_estimate(model, n_layer, false, opt);
  ASSERT_LT(but_one + 4096, whole);
  const FitOptions fit{.targets = {0}};
  {
    auto r = sims(size_t{512} << 20, {{.device = "sim0", .gib = gib(whole + 4096)}});
    auto choice = fit_placement(*model, {*r->find("sim0")}, r->cpu(), opt, {}, fit);
    ASSERT_TRUE(choice.ok()) << choice.error().message;
    EXPECT_FALSE(choice->split) << "the whole model fits";
  }
  auto r = sims(size_t{512} << 20, {{.device = "sim0", .gib = gib(but_one + 4096)}});
  Device* s0 = *r->find("sim0");
  auto choice = fit_placement(*model, {s0}, r->cpu(), opt, {}, fit);
  ASSERT_TRUE(choice.ok()) << choice.error().message;
  ASSERT_TRUE(choice->split);
  EXPECT_EQ(choice->options.n_gpu_layers, n_layer) << choice->summary;
  EXPECT_NE(choice->summary.find("-ngl " + std::to_string(n_layer)), std::string::npos) << choice->summary;
  const SplitContext placed = place_split_context(*r, model, choice->options, opt);
  ASSERT_TRUE(placed.ctx);
  EXPECT_LE(r->residency(*s0).used(), r->residency(*s0).budget());
}

// With no room anywhere, the error names the devices and sizes; a context the user did not set
// shrinks before that, down to -fitc.
TEST(Fit, NamesTheSizesWhenNothingFits) {
  auto model = load(fixture_models().front());
  ASSERT_TRUE(model);
  auto r = sims(size_t{512} << 20, {{.device = "sim0", .gib = 0.0001}, {.device = "cpu", .gib = 0.0001}});
  const ContextOptions opt{.n_ctx = 256, .n_batch = 64, .n_ubatch = 32};
  auto choice = fit_placement(*model, {*r->find("sim0")}, r->cpu(), opt, {}, {.targets = {0}, .ctx_set = true});
  ASSERT_FALSE(choice.ok());
  const std::string& m = choice.error().message;
  EXPECT_NE(m.find("does not fit"), std::string::npos) << m;
  EXPECT_NE(m.find("sim0"), std::string::npos) << m;
  EXPECT_NE(m.find("cpu"), std::string::npos) << m;
}

}  // namespace
}  // namespace kiln
