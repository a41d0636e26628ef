#include "runtime/planner.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "backends/cpu/cpu_backend.h"
#include "runtime/random_graph.h"

namespace kiln {
namespace {

void expect_close(const std::vector<float>& got, const std::vector<float>& want, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_NEAR(got[i], want[i], 1e-5f * std::max(1.0f, std::fabs(want[i]))) << what << " element " << i;
  }
}

// Liveness computed here, independently of the planner: [position defined, last position read]
// for each tensor owning arena memory (outputs: to the end).
struct Interval {
  int64_t def = -1, last = -1;
};
std::vector<Interval> liveness(const Graph& g) {
  const auto& ts = g.tensors();
  const auto& ops = g.op_nodes();
  std::vector<Interval> live(ts.size());
  for (size_t p = 0; p < ops.size(); ++p) {
    const GraphTensor& t = ts[static_cast<size_t>(ops[p])];
    if (t.storage == ops[p])
      live[static_cast<size_t>(ops[p])] = {static_cast<int64_t>(p), static_cast<int64_t>(p)};
    for (int i = 0; i < t.n_src; ++i) {
      Interval& r = live[static_cast<size_t>(ts[static_cast<size_t>(t.src[static_cast<size_t>(i)])].storage)];
      r.last = std::max(r.last, static_cast<int64_t>(p));
    }
    Interval& own = live[static_cast<size_t>(t.storage)];
    own.last = std::max(own.last, static_cast<int64_t>(p));
  }
  for (const GraphTensor& t : ts) {
    if (t.output) live[static_cast<size_t>(t.storage)].last = static_cast<int64_t>(ops.size());
  }
  return live;
}

bool elementwise(OpKind k) {
  return k == OpKind::Add || k == OpKind::Mul || k == OpKind::Scale || k == OpKind::Silu ||
         k == OpKind::Gelu || k == OpKind::SwiGlu;
}

TEST(Planner, RandomGraphsNeverOverlapLiveTensorsAndBeatTheNaiveSum) {
  CpuDevice cpu;
  int reused = 0, inplace = 0;
  for (uint32_t seed = 1; seed <= 40; ++seed) {
    test::RandomGraphOptions o;
    o.seed = seed;
    o.n_ops = 20 + static_cast<int>(seed % 5) * 20;
    auto rg = test::make_random_graph(cpu, o);
    const Graph& g = rg->graph;
    auto mp = plan_memory(g, {.alignment = 64});
    ASSERT_TRUE(mp.ok()) << mp.error().message;
    auto naive = plan_memory(g, {.alignment = 64, .reuse = false});
    ASSERT_TRUE(naive.ok());
    EXPECT_EQ(naive->arena_bytes, naive->naive_bytes);
    EXPECT_LE(mp->arena_bytes, mp->naive_bytes);
    reused += mp->arena_bytes < mp->naive_bytes;

    const auto live = liveness(g);
    const auto& ts = g.tensors();
    std::vector<int32_t> owners;
    for (int32_t id : g.op_nodes()) {
      if (ts[static_cast<size_t>(id)].storage == id) owners.push_back(id);
    }
    for (int32_t a : owners) {
      const size_t oa = mp->offset[static_cast<size_t>(a)];
      ASSERT_NE(oa, kNotInArena);
      EXPECT_EQ(oa % 64, 0u);
      EXPECT_LE(oa + ts[static_cast<size_t>(a)].view.span_bytes(), mp->arena_bytes);
      const int32_t donor = mp->inplace_of[static_cast<size_t>(a)];
      if (donor >= 0) {
        ++inplace;
        // Legal in place: element-wise op reading the donor directly, the donor dying right here.
        const GraphTensor& t = ts[static_cast<size_t>(a)];
        EXPECT_TRUE(elementwise(t.op));
        EXPECT_TRUE(t.src[0] == donor || (t.op == OpKind::SwiGlu && t.src[1] == donor));
        EXPECT_EQ(live[static_cast<size_t>(donor)].last, live[static_cast<size_t>(a)].def);
        EXPECT_EQ(ts[static_cast<size_t>(donor)].view.ne, t.view.ne);
      }
      for (int32_t b : owners) {
        if (b <= a) continue;
        const Interval& la = live[static_cast<size_t>(a)];
        const Interval& lb = live[static_cast<size_t>(b)];
        const bool time_overlap = la.def <= lb.last && lb.def <= la.last;
        const size_t ob = mp->offset[static_cast<size_t>(b)];
        const bool space_overlap = oa < ob + ts[static_cast<size_t>(b)].view.span_bytes() &&
                                   ob < oa + ts[static_cast<size_t>(a)].view.span_bytes();
        if (!time_overlap || !space_overlap) continue;
        const bool handed_over = mp->inplace_of[static_cast<size_t>(b)] == a && la.last == lb.def;
        EXPECT_TRUE(handed_over) << "seed " << seed << ": " << g.describe(a) << " live [" << la.def << ", "
                                 << la.last << "] and " << g.describe(b) << " live [" << lb.def << ", "
                                 << lb.last << "] share bytes at " << oa << " / " << ob;
      }
    }

    // Outputs survive to the end with the right values.
    ThreadPool pool(2);
    CpuBackend backend(cpu, pool);
    ComputeArena arena(cpu, "test");
    const auto out = test::run_once(backend, arena, *rg);
    for (size_t i = 0; i < out.size(); ++i) {
      expect_close(out[i], rg->expected[i], "seed " + std::to_string(seed) + " output " + std::to_string(i));
    }
  }
  EXPECT_GT(reused, 30);  // reuse is the point: most random graphs must fit in less than the sum
  EXPECT_GT(inplace, 40);
}

TEST(Planner, InPlaceOnlyWhereTheSourceDiesAndIsNoView) {
  Graph g;
  Tensor x = g.input("x", DType::F32, {16, 4, 1, 1});
  Tensor a = g.silu(x);         // input: never a donor
  Tensor b = g.scale(a, 2.0f);  // a dies here: in place
  Tensor c = g.scale(b, 3.0f);  // b is read again below: not in place
  Tensor d = g.add(c, b);       // c dies here: in place (b is another tensor)
  Tensor v = g.reshape(d, {32, 2, 1, 1});
  Tensor e = g.silu(d);  // d is read later through v: not in place
  Tensor f = g.add(g.reshape(v, {16, 4, 1, 1}), e);
  Tensor out = g.scale(f, 1.0f);  // f is an output: its block is kept, out gets its own
  g.mark_output(f);
  g.mark_output(out);
  auto mp = plan_memory(g, {.alignment = 64});
  ASSERT_TRUE(mp.ok()) << mp.error().message;
  auto donor = [&](Tensor t) { return mp->inplace_of[static_cast<size_t>(t.id)]; };
  EXPECT_EQ(donor(a), -1);
  EXPECT_EQ(donor(b), a.id);
  EXPECT_EQ(donor(c), -1);
  EXPECT_EQ(donor(d), c.id);
  EXPECT_EQ(donor(e), -1);
  EXPECT_EQ(donor(out), -1);
  EXPECT_EQ(mp->offset[static_cast<size_t>(b.id)], mp->offset[static_cast<size_t>(a.id)]);
  EXPECT_NE(mp->offset[static_cast<size_t>(out.id)], mp->offset[static_cast<size_t>(f.id)]);
  EXPECT_EQ(mp->offset[static_cast<size_t>(v.id)], kNotInArena);  // views own no memory
}

TEST(Planner, ReserveMeasuresWithoutAllocating) {
  CpuDevice cpu;
  auto rg = test::make_random_graph(cpu, {.seed = 3, .n_ops = 60});
  const uint64_t allocations = cpu.allocation_count();
  ComputeArena arena(cpu, "test");
  auto bytes = arena.reserve(rg->graph);
  ASSERT_TRUE(bytes.ok());
  EXPECT_EQ(cpu.allocation_count(), allocations);
  EXPECT_EQ(arena.allocated_bytes(), 0u);
  EXPECT_EQ(*bytes, plan_memory(rg->graph, {.alignment = 64})->arena_bytes);
  EXPECT_EQ(arena.reserved_bytes(), *bytes);
  const size_t compute_before = cpu.allocated_bytes(MemoryKind::Compute);
  ASSERT_TRUE(arena.allocate().ok());
  EXPECT_EQ(cpu.allocation_count(), allocations + 1);
  EXPECT_EQ(cpu.allocated_bytes(MemoryKind::Compute), compute_before + *bytes);
  EXPECT_EQ(arena.allocated_bytes(), *bytes);
}

TEST(Planner, GraphsSharingOneArenaComputeWhatTheyComputeAlone) {
  CpuDevice cpu;
  ThreadPool pool(2);
  CpuBackend backend(cpu, pool);
  auto small = test::make_random_graph(cpu, {.seed = 11, .n_ops = 30, .row_counts = {1, 4}});
  auto large = test::make_random_graph(cpu, {.seed = 12, .n_ops = 80, .row_counts = {1, 16, 40}});

  ComputeArena alone_small(cpu, "small"), alone_large(cpu, "large");
  const auto want_small = test::run_once(backend, alone_small, *small);
  const auto want_large = test::run_once(backend, alone_large, *large);

  ComputeArena shared(cpu, "shared");
  const size_t need_small = *shared.reserve(small->graph);
  const size_t need_large = *shared.reserve(large->graph);
  EXPECT_LT(need_small, need_large);
  const uint64_t allocations = cpu.allocation_count();
  ASSERT_TRUE(shared.allocate().ok());
  EXPECT_EQ(shared.allocated_bytes(), need_large);
  auto plan_small = shared.plan(small->graph);
  auto plan_large = shared.plan(large->graph);
  ASSERT_TRUE(plan_small.ok() && plan_large.ok());
  ASSERT_TRUE(shared.allocate().ok());  // already large enough: no new buffer
  EXPECT_EQ(cpu.allocation_count(), allocations + 1);
  ASSERT_TRUE(backend.prepare(*plan_small).ok() && backend.prepare(*plan_large).ok());
  ASSERT_TRUE(small->bind_inputs(*plan_small).ok() && large->bind_inputs(*plan_large).ok());
  for (int round = 0; round < 3; ++round) {
    ASSERT_TRUE(backend.execute(*plan_large).ok());
    for (size_t i = 0; i < want_large.size(); ++i) {
      EXPECT_EQ(test::download_f32(cpu, plan_large->view(large->outputs[i])), want_large[i]);
    }
    ASSERT_TRUE(backend.execute(*plan_small).ok());
    for (size_t i = 0; i < want_small.size(); ++i) {
      EXPECT_EQ(test::download_f32(cpu, plan_small->view(small->outputs[i])), want_small[i]);
    }
  }
}

TEST(Planner, ArenaTooSmallIsAnErrorBeforeAnythingRuns) {
  CpuDevice cpu;
  ThreadPool pool(1);
  CpuBackend backend(cpu, pool);
  auto rg = test::make_random_graph(cpu, {.seed = 5, .n_ops = 20});
  ComputeArena arena(cpu, "llama");
  auto plan = arena.plan(rg->graph);
  ASSERT_TRUE(plan.ok());
  ASSERT_TRUE(rg->bind_inputs(*plan).ok());
  ASSERT_TRUE(backend.prepare(*plan).ok());
  Status st = backend.execute(*plan);  // never allocated
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.error().message.find("arena 'llama' holds 0 bytes"), std::string::npos) << st.error().message;
}

}  // namespace
}  // namespace kiln
