// SplitPlan (runtime/graph_split.h): a graph whose weights lie on two devices runs in parts, each
// node where its weights are, the tensors between them copied through the devices; the result
// equals the one-device run bit for bit (sim computes with the CPU's kernels). A node that reads
// memory of two devices, or of none, is refused with a message naming it.
#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "backends/cpu/cpu_backend.h"
#include "backends/sim/sim_backend.h"
#include "runtime/graph_split.h"
#include "runtime/random_graph.h"

namespace kiln {
namespace {

constexpr int64_t kEmbd = 32, kFf = 48, kTokens = 3;

struct Weights {
  TensorView up, down;  // [kEmbd, kFf], [kFf, kEmbd]
};

// y = down · silu(up · rms_norm(x)) + x, the output marked; the input x named.
struct Mlp {
  Graph g;
  Tensor x, y;
  explicit Mlp(const Weights& w) {
    x = g.input("x", DType::F32, {kEmbd, kTokens, 1, 1});
    const Tensor h = g.silu(g.mul_mat(g.external("up", w.up), g.rms_norm(x, 1e-5f)));
    y = g.add(g.mul_mat(g.external("down", w.down), h), x);
    g.mark_output(y);
  }
};

class GraphSplit : public ::testing::Test {
 protected:
  void SetUp() override {
    std::mt19937 rng(11);
    std::normal_distribution<float> d(0.0f, 1.0f);
    x_.resize(kEmbd * kTokens);
    up_.resize(kEmbd * kFf);
    down_.resize(kFf * kEmbd);
    for (auto* v : {&x_, &up_, &down_})
      for (float& f : *v) f = d(rng) * 0.3f;
    auto sim = SimDevice::create({.name = "sim0", .capacity = 1 << 20});
    ASSERT_TRUE(sim.ok());
    sim_ = std::move(*sim);
    sim_backend_ = std::make_unique<SimBackend>(*sim_, pool_);
  }

  // Runs `g` split over {cpu, sim0} with x from the host; the output's floats.
  std::vector<float> run_split(const Mlp& m, size_t expect_parts) {
    ComputeArena cpu_arena(cpu_, "test"), sim_arena(*sim_, "test");
    std::vector<ComputeArena*> arenas{&cpu_arena, &sim_arena};
    auto sp = SplitPlan::create(m.g, arenas);
    EXPECT_TRUE(sp.ok()) << sp.error().message;
    if (!sp.ok()) return {};
    EXPECT_EQ(sp->part_count(), expect_parts);
    std::vector<std::unique_ptr<Buffer>> transfer;
    std::vector<SplitDevice> devices;
    for (Backend* b : {static_cast<Backend*>(&cpu_backend_), static_cast<Backend*>(sim_backend_.get())}) {
      const size_t d = devices.size();
      Buffer* t = nullptr;
      if (sp->transfer_bytes(d) > 0) {
        auto buf = b->device().allocate({sp->transfer_bytes(d), MemoryKind::Compute, "transfer"});
        EXPECT_TRUE(buf.ok());
        transfer.push_back(std::move(*buf));
        t = transfer.back().get();
      }
      devices.push_back({b, t, 0});
    }
    // x wherever a part reads it: on the CPU in place, on sim0 uploaded.
    test::DeviceTensor x_sim = test::upload_f32(*sim_, x_, {kEmbd, kTokens, 1, 1}, MemoryKind::Compute);
    if (sp->reads_on(m.x, 0)) {
      EXPECT_TRUE(sp->bind(m.x, 0, contiguous_view(DType::F32, {kEmbd, kTokens, 1, 1}, x_.data())).ok());
    }
    if (sp->reads_on(m.x, 1)) {
      EXPECT_TRUE(sp->bind(m.x, 1, x_sim.view).ok());
    }
    EXPECT_TRUE(sp->prepare(devices).ok());
    const Status st = sp->execute(devices);
    EXPECT_TRUE(st.ok()) << st.error().message;
    std::vector<float> out(kEmbd * kTokens);
    EXPECT_TRUE(sp->download(m.y, out.data(), out.size() * sizeof(float)).ok());
    return out;
  }

  std::vector<float> x_, up_, down_;
  ThreadPool pool_{2};
  CpuDevice cpu_;
  CpuBackend cpu_backend_{cpu_, pool_};
  std::unique_ptr<SimDevice> sim_;
  std::unique_ptr<SimBackend> sim_backend_;
};

TEST_F(GraphSplit, PartsOnTwoDevicesGiveTheOneDeviceBits) {
  const TensorView up_host = contiguous_view(DType::F32, {kEmbd, kFf, 1, 1}, up_.data());
  const TensorView down_host = contiguous_view(DType::F32, {kFf, kEmbd, 1, 1}, down_.data());
  const std::vector<float> want = run_split(Mlp({up_host, down_host}), 1);  // every weight on the CPU
  test::DeviceTensor up_sim = test::upload_f32(*sim_, up_, {kEmbd, kFf, 1, 1}, MemoryKind::Weights);
  test::DeviceTensor down_sim = test::upload_f32(*sim_, down_, {kFf, kEmbd, 1, 1}, MemoryKind::Weights);
  // up on sim0, down on the CPU: the norm follows its input (the CPU, the first device), up runs on
  // sim0, silu follows it, down on the CPU: three parts, two crossings.
  const std::vector<float> split = run_split(Mlp({up_sim.view, down_host}), 3);
  ASSERT_EQ(split.size(), want.size());
  EXPECT_EQ(std::memcmp(split.data(), want.data(), want.size() * sizeof(float)), 0);
  // Every weight on sim0: the norm on the CPU (the first device) then one part on sim0.
  const std::vector<float> on_sim = run_split(Mlp({up_sim.view, down_sim.view}), 2);
  EXPECT_EQ(std::memcmp(on_sim.data(), want.data(), want.size() * sizeof(float)), 0);
}

TEST_F(GraphSplit, ANodeOverTwoDevicesIsRefused) {
  test::DeviceTensor a_sim = test::upload_f32(*sim_, x_, {kEmbd, kTokens, 1, 1}, MemoryKind::Weights);
  Graph g;
  const Tensor a = g.external("a_on_sim0", a_sim.view);
  const Tensor b = g.external("b_on_cpu", contiguous_view(DType::F32, {kEmbd, kTokens, 1, 1}, x_.data()));
  g.mark_output(g.add(a, b, "sum"));
  std::vector<Device*> devices{&cpu_, sim_.get()};
  const std::vector<std::string> names{"cpu", "sim0"};
  auto assigned = assign_devices(g, placement_by_holds(devices), names);
  ASSERT_FALSE(assigned.ok());
  const std::string& m = assigned.error().message;
  EXPECT_NE(m.find("'sum'"), std::string::npos) << m;
  EXPECT_NE(m.find("sim0"), std::string::npos) << m;
  EXPECT_NE(m.find("cpu"), std::string::npos) << m;
  // Memory on neither device.
  auto elsewhere = assign_devices(g, [](const TensorView&) { return kNoDevice; }, names);
  ASSERT_FALSE(elsewhere.ok());
  EXPECT_NE(elsewhere.error().message.find("none of the devices"), std::string::npos);
}

}  // namespace
}  // namespace kiln
