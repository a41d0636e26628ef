// The runtime's API end to end, as a model will use it: build graph -> plan -> bind inputs ->
// execute -> read outputs. y = silu(W · rms_norm(x)), checked against plain loops, on the CPU and
// on the sim device (where every byte goes in and out through explicit copies).
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "backends/cpu/cpu_backend.h"
#include "backends/sim/sim_backend.h"
#include "runtime/random_graph.h"

namespace kiln {
namespace {

constexpr int64_t kEmbd = 64, kFf = 48, kTokens = 5;
constexpr float kEps = 1e-5f;

// Plain loops: the reference. x [kEmbd, kTokens], w [kEmbd, kFf] (row j of w is output j).
std::vector<float> reference(const std::vector<float>& x, const std::vector<float>& w) {
  std::vector<float> y(kFf * kTokens);
  for (int64_t t = 0; t < kTokens; ++t) {
    double ss = 0;
    for (int64_t i = 0; i < kEmbd; ++i) ss += double(x[t * kEmbd + i]) * x[t * kEmbd + i];
    const double inv = 1.0 / std::sqrt(ss / kEmbd + kEps);
    for (int64_t j = 0; j < kFf; ++j) {
      double dot = 0;
      for (int64_t i = 0; i < kEmbd; ++i) dot += x[t * kEmbd + i] * inv * w[j * kEmbd + i];
      y[t * kFf + j] = static_cast<float>(dot / (1.0 + std::exp(-dot)));
    }
  }
  return y;
}

// The whole flow on one backend; `w` is already in device memory.
std::vector<float> run_example(Backend& backend, const TensorView& w, const TensorView& x_memory) {
  Device& device = backend.device();
  // 1. Build once per shape. Errors stick to the graph: check status() once.
  Graph g;
  Tensor x = g.input("x", DType::F32, {kEmbd, kTokens, 1, 1});
  Tensor h = g.rms_norm(x, kEps, "attn_norm");
  Tensor up = g.mul_mat(g.external("ffn_up.weight", w), h, "ffn_up");
  Tensor y = g.silu(up, "ffn_act");
  g.mark_output(y);
  EXPECT_TRUE(g.status().ok()) << g.status().error().message;
  // 2. Plan in an arena on the backend's device: reserve every graph that shares it, allocate once.
  ComputeArena arena(device, "example");
  EXPECT_TRUE(arena.reserve(g).ok());
  EXPECT_TRUE(arena.allocate().ok());
  auto plan = arena.plan(g);
  EXPECT_TRUE(plan.ok());
  EXPECT_TRUE(backend.prepare(*plan).ok());  // kernel scratch (mul_mat converts activations)
  // 3. Bind inputs and execute (allocates nothing; repeatable).
  EXPECT_TRUE(plan->bind(x, x_memory).ok());
  Status st = backend.execute(*plan);
  EXPECT_TRUE(st.ok()) << st.error().message;
  // 4. Read outputs through the device.
  return test::download_f32(device, plan->view(y));
}

class Example : public ::testing::Test {
 protected:
  void SetUp() override {
    std::mt19937 rng(5);
    std::normal_distribution<float> d(0.0f, 1.0f);
    x_.resize(kEmbd * kTokens);
    w_.resize(kEmbd * kFf);
    for (float& v : x_) v = d(rng);
    for (float& v : w_) v = d(rng) * 0.2f;
    want_ = reference(x_, w_);
  }
  void expect_matches(const std::vector<float>& got) {
    ASSERT_EQ(got.size(), want_.size());
    for (size_t i = 0; i < got.size(); ++i) {
      EXPECT_NEAR(got[i], want_[i], 1e-4f * std::max(1.0f, std::fabs(want_[i]))) << "element " << i;
    }
  }
  std::vector<float> x_, w_, want_;
  ThreadPool pool_{2};
};

TEST_F(Example, RmsNormMulMatSiluOnCpu) {
  CpuDevice cpu;
  CpuBackend backend(cpu, pool_);
  // Host memory is used in place: weights as they are mapped, inputs as the caller holds them.
  const TensorView w = contiguous_view(DType::F32, {kEmbd, kFf, 1, 1}, w_.data());
  const TensorView x = contiguous_view(DType::F32, {kEmbd, kTokens, 1, 1}, x_.data());
  expect_matches(run_example(backend, w, x));
}

TEST_F(Example, RmsNormMulMatSiluOnSim) {
  auto sim = SimDevice::create({.name = "sim0", .capacity = 1 << 20});
  ASSERT_TRUE(sim.ok());
  SimBackend backend(**sim, pool_);
  test::DeviceTensor w = test::upload_f32(**sim, w_, {kEmbd, kFf, 1, 1}, MemoryKind::Weights);
  test::DeviceTensor x = test::upload_f32(**sim, x_, {kEmbd, kTokens, 1, 1}, MemoryKind::Compute);
  expect_matches(run_example(backend, w.view, x.view));
}

TEST_F(Example, ExecuteNeedsPreparedScratch) {
  CpuDevice cpu;
  CpuBackend backend(cpu, pool_);
  Graph g;
  Tensor x = g.input("x", DType::F32, {kEmbd, kTokens, 1, 1});
  g.mark_output(g.mul_mat(g.external("w", contiguous_view(DType::F32, {kEmbd, kFf, 1, 1}, w_.data())), x));
  ComputeArena arena(cpu, "example");
  auto plan = arena.plan(g);
  ASSERT_TRUE(plan.ok() && arena.allocate().ok());
  ASSERT_TRUE(plan->bind(x, contiguous_view(DType::F32, {kEmbd, kTokens, 1, 1}, x_.data())).ok());
  ASSERT_GT(plan->memory().scratch_bytes, 0u);
  Status st = backend.execute(*plan);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.error().message.find("call prepare()"), std::string::npos) << st.error().message;
  ASSERT_TRUE(backend.prepare(*plan).ok());
  EXPECT_EQ(cpu.allocated_bytes(MemoryKind::Scratch), backend.scratch_bytes());
  EXPECT_TRUE(backend.execute(*plan).ok());
  backend.release_scratch();
  EXPECT_EQ(cpu.allocated_bytes(MemoryKind::Scratch), 0u);
  EXPECT_FALSE(backend.execute(*plan).ok());
  ASSERT_TRUE(backend.prepare(*plan).ok());
  EXPECT_TRUE(backend.execute(*plan).ok());
}

}  // namespace
}  // namespace kiln
