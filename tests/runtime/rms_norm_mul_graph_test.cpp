// Graph::rms_norm_mul through the runtime: the norms a decoder builds (a hidden state's over
// n_embd, a per-head q/k norm whose weight repeats over heads and tokens, the output norm after
// get_rows), fused, give the bits of the same graph built as mul(rms_norm(x), w), executed on the
// CPU backend with three threads splitting the rows.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <vector>

#include "backends/cpu/cpu_backend.h"
#include "runtime/planner.h"
#include "runtime/random_graph.h"

namespace kiln {
namespace {

constexpr int64_t kEmbd = 67, kTokens = 9, kHeadDim = 16, kHeads = 6;
constexpr float kEps = 1e-6f;

std::vector<float> values(std::mt19937& rng, size_t n, float lo, float hi) {
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> v(n);
  for (float& f : v) f = d(rng);
  return v;
}

struct Norms {
  std::vector<float> x, q, w_embd, w_head;
  std::vector<int32_t> rows{8, 2, 5};
};

// Runs the three norms of `n`, fused or as rms_norm then mul, and returns the outputs one after
// another, plus the number of op nodes the graph had.
std::vector<float> run(const Norms& n, bool fused, size_t& op_nodes) {
  CpuDevice cpu;
  ThreadPool pool(3);
  CpuBackend backend(cpu, pool);
  Graph g;
  const Tensor x = g.input("x", DType::F32, {kEmbd, kTokens, 1, 1});
  const Tensor q = g.input("q", DType::F32, {kHeadDim, kHeads, kTokens, 1});
  const Tensor rows = g.input("rows", DType::I32, {3, 1, 1, 1});
  const Tensor w_embd = g.external(
      "w_embd", contiguous_view(DType::F32, {kEmbd, 1, 1, 1}, const_cast<float*>(n.w_embd.data())));
  const Tensor w_head = g.external(
      "w_head", contiguous_view(DType::F32, {kHeadDim, 1, 1, 1}, const_cast<float*>(n.w_head.data())));
  auto norm = [&](Tensor a, Tensor w) {
    return fused ? g.rms_norm_mul(a, w, kEps) : g.mul(g.rms_norm(a, kEps), w);
  };
  const Tensor hidden = norm(x, w_embd);
  const Tensor q_normed = norm(q, w_head);
  const Tensor out_normed = norm(g.get_rows(g.add(x, hidden), rows), w_embd);
  for (Tensor t : {hidden, q_normed, out_normed}) g.mark_output(t);
  EXPECT_TRUE(g.status().ok()) << g.status().error().message;
  op_nodes = g.op_nodes().size();

  ComputeArena arena(cpu, "rms_norm_mul");
  EXPECT_TRUE(arena.reserve(g).ok());
  EXPECT_TRUE(arena.allocate().ok());
  auto plan = arena.plan(g);
  EXPECT_TRUE(plan.ok());
  EXPECT_TRUE(backend.prepare(*plan).ok());
  EXPECT_TRUE(
      plan->bind(x, contiguous_view(DType::F32, {kEmbd, kTokens, 1, 1}, const_cast<float*>(n.x.data())))
          .ok());
  EXPECT_TRUE(plan->bind(q, contiguous_view(DType::F32, {kHeadDim, kHeads, kTokens, 1},
                                            const_cast<float*>(n.q.data())))
                  .ok());
  EXPECT_TRUE(
      plan->bind(rows, contiguous_view(DType::I32, {3, 1, 1, 1}, const_cast<int32_t*>(n.rows.data()))).ok());
  const Status st = backend.execute(*plan);
  EXPECT_TRUE(st.ok()) << st.error().message;
  std::vector<float> out;
  for (Tensor t : {hidden, q_normed, out_normed}) {
    const std::vector<float> v = test::download_f32(cpu, plan->view(t));
    out.insert(out.end(), v.begin(), v.end());
  }
  return out;
}

TEST(RmsNormMulGraph, FusedNormsGiveTheBitsOfRmsNormThenMul) {
  std::mt19937 rng(21);
  Norms n;
  n.x = values(rng, kEmbd * kTokens, -4.0f, 4.0f);
  n.q = values(rng, kHeadDim * kHeads * kTokens, -4.0f, 4.0f);
  n.w_embd = values(rng, kEmbd, -1.5f, 1.5f);
  n.w_head = values(rng, kHeadDim, -1.5f, 1.5f);
  size_t fused_nodes = 0, unfused_nodes = 0;
  const std::vector<float> fused = run(n, true, fused_nodes);
  const std::vector<float> unfused = run(n, false, unfused_nodes);
  ASSERT_EQ(fused.size(), static_cast<size_t>((kEmbd * kTokens) + (kHeadDim * kHeads * kTokens) + kEmbd * 3));
  ASSERT_EQ(fused.size(), unfused.size());
  EXPECT_EQ(std::memcmp(fused.data(), unfused.data(), fused.size() * sizeof(float)), 0);
  EXPECT_EQ(unfused_nodes - fused_nodes, 3u);  // one node per norm fewer
}

TEST(RmsNormMulGraph, RejectsAWeightThatDoesNotRepeat) {
  Graph g;
  const Tensor x = g.input("x", DType::F32, {kEmbd, kTokens, 1, 1});
  const Tensor w = g.input("w", DType::F32, {kHeadDim, 1, 1, 1});
  EXPECT_FALSE(g.rms_norm_mul(x, w, kEps, "bad_norm").valid());
  ASSERT_FALSE(g.status().ok());
  EXPECT_NE(g.status().error().message.find("bad_norm"), std::string::npos) << g.status().error().message;
}

}  // namespace
}  // namespace kiln
