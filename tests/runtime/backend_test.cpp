// CPU and sim backends: identical results, device memory rules, execution without allocation.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "backends/cpu/cpu_backend.h"
#include "backends/sim/sim_backend.h"
#include "runtime/alloc_counter.h"
#include "runtime/random_graph.h"

namespace kiln {
namespace {

std::unique_ptr<SimDevice> make_sim(size_t capacity) {
  auto dev = SimDevice::create({.name = "sim0", .capacity = capacity});
  KILN_ASSERT(dev.ok(), dev.ok() ? "" : dev.error().message);
  return std::move(dev).value();
}

TEST(Backends, CpuAndSimGiveIdenticalResults) {
  CpuDevice cpu;
  auto sim = make_sim(8 << 20);
  ThreadPool pool(2);
  CpuBackend cpu_backend(cpu, pool);
  SimBackend sim_backend(*sim, pool);
  for (uint32_t seed = 100; seed < 110; ++seed) {
    auto on_cpu = test::make_random_graph(cpu, {.seed = seed, .n_ops = 50});
    auto on_sim = test::make_random_graph(*sim, {.seed = seed, .n_ops = 50});
    ComputeArena cpu_arena(cpu, "cpu-arena"), sim_arena(*sim, "sim-arena");
    const auto a = test::run_once(cpu_backend, cpu_arena, *on_cpu);
    const auto b = test::run_once(sim_backend, sim_arena, *on_sim);
    ASSERT_EQ(a.size(), b.size());
    for (size_t i = 0; i < a.size(); ++i) {
      EXPECT_EQ(std::memcmp(a[i].data(), b[i].data(), a[i].size() * sizeof(float)), 0) << "seed " << seed;
      for (size_t j = 0; j < a[i].size(); ++j) {
        ASSERT_NEAR(a[i][j], on_cpu->expected[i][j],
                    1e-5f * std::max(1.0f, std::fabs(on_cpu->expected[i][j])));
      }
    }
    EXPECT_GT(sim->allocated_bytes(MemoryKind::Compute), 0u);  // the arena lives in the sim pool
  }
  EXPECT_EQ(sim->memory_info().free, sim->memory_info().total);  // everything returned
}

TEST(Backends, ThreadCountDoesNotChangeResults) {
  CpuDevice cpu;
  auto rg = test::make_random_graph(cpu, {.seed = 42, .n_ops = 60, .row_counts = {1, 5, 33}});
  ThreadPool one(1), three(3);
  CpuBackend b1(cpu, one), b3(cpu, three);
  ComputeArena arena1(cpu, "a1"), arena3(cpu, "a3");
  EXPECT_EQ(test::run_once(b1, arena1, *rg), test::run_once(b3, arena3, *rg));
}

void expect_execute_allocates_nothing(Device& device, Backend& backend) {
  auto rg = test::make_random_graph(device, {.seed = 9, .n_ops = 60});
  ComputeArena arena(device, "arena");
  const auto first = test::run_once(backend, arena, *rg);  // plans, allocates, runs
  auto plan = arena.plan(rg->graph);
  ASSERT_TRUE(plan.ok());
  ASSERT_TRUE(rg->bind_inputs(*plan).ok());
  ASSERT_TRUE(backend.prepare(*plan).ok());
  const uint64_t device_allocations = device.allocation_count();
  {
    test::CountAllocations count;
    for (int i = 0; i < 5; ++i) ASSERT_TRUE(backend.execute(*plan).ok());
    EXPECT_EQ(count.count(), 0) << "operator new during execute on " << device.name();
  }
  EXPECT_EQ(device.allocation_count(), device_allocations);
  for (size_t i = 0; i < first.size(); ++i)
    EXPECT_EQ(test::download_f32(device, plan->view(rg->outputs[i])), first[i]);
}

TEST(Backends, ExecuteAllocatesNothingOnCpu) {
  CpuDevice cpu;
  ThreadPool pool(3);
  CpuBackend backend(cpu, pool);
  expect_execute_allocates_nothing(cpu, backend);
}

TEST(Backends, ExecuteAllocatesNothingOnSim) {
  auto sim = make_sim(4 << 20);
  ThreadPool pool(3);
  SimBackend backend(*sim, pool);
  expect_execute_allocates_nothing(*sim, backend);
}

TEST(Backends, WriteIntoExternalMemoryIsSeenByLaterNodes) {
  // A KV-cache-like external: rows 2..3 are overwritten by the graph, then the whole cache is read.
  auto sim = make_sim(1 << 20);
  ThreadPool pool(2);
  SimBackend backend(*sim, pool);
  std::vector<float> cache(16 * 6), x(16 * 2);
  for (size_t i = 0; i < cache.size(); ++i) cache[i] = static_cast<float>(i);
  for (size_t i = 0; i < x.size(); ++i) x[i] = -static_cast<float>(i) - 1;
  test::DeviceTensor kv = test::upload_f32(*sim, cache, {16, 6, 1, 1}, MemoryKind::Kv);
  test::DeviceTensor xin = test::upload_f32(*sim, x, {16, 2, 1, 1}, MemoryKind::Compute);
  Graph g;
  Tensor k = g.external("cache_k", kv.view);
  Tensor in = g.input("x", DType::F32, {16, 2, 1, 1});
  g.cpy_into(g.scale(in, 2.0f), g.view(k, {16, 2, 1, 1}, kv.view.nb, 2 * 64));
  Tensor all = g.scale(k, 1.0f, "read_back");
  g.mark_output(all);
  ASSERT_TRUE(g.status().ok()) << g.status().error().message;
  ComputeArena arena(*sim, "arena");
  auto plan = arena.plan(g);
  ASSERT_TRUE(plan.ok() && arena.allocate().ok() && backend.prepare(*plan).ok() &&
              plan->bind(in, xin.view).ok());
  ASSERT_TRUE(backend.execute(*plan).ok());
  std::vector<float> want = cache;
  for (size_t i = 0; i < x.size(); ++i) want[32 + i] = 2.0f * x[i];
  EXPECT_EQ(test::download_f32(*sim, plan->view(all)), want);
  EXPECT_EQ(test::download_f32(*sim, kv.view), want);  // the external memory itself changed
}

TEST(Backends, MemoryNotOnTheDeviceIsRefusedBeforeRunning) {
  auto sim = make_sim(1 << 20);
  CpuDevice cpu;
  ThreadPool pool(1);
  SimBackend backend(*sim, pool);
  std::vector<float> host(16 * 4, 1.0f);
  Graph g;
  Tensor in = g.input("tokens_embd", DType::F32, {16, 4, 1, 1});
  g.mark_output(g.silu(in));
  ComputeArena arena(*sim, "arena");
  auto plan = arena.plan(g);
  ASSERT_TRUE(plan.ok() && arena.allocate().ok() && backend.prepare(*plan).ok());

  Status st = backend.execute(*plan);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.error().message.find("input 'tokens_embd' (#0 input) is not bound"), std::string::npos)
      << st.error().message;

  ASSERT_TRUE(plan->bind(in, contiguous_view(DType::F32, {16, 4, 1, 1}, host.data())).ok());
  st = backend.execute(*plan);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.error().message.find("is not in memory of device 'sim0'"), std::string::npos)
      << st.error().message;

  Status bad = plan->bind(in, contiguous_view(DType::F32, {16, 3, 1, 1}, host.data()));
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message.find("got f32 [16, 3, 1, 1]"), std::string::npos) << bad.error().message;

  CpuBackend cpu_backend(cpu, pool);
  st = cpu_backend.execute(*plan);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.error().message.find("is on device 'sim0'"), std::string::npos) << st.error().message;
}

TEST(SimDevice, OutOfMemoryNamesRequestFreeAndCapacity) {
  auto sim = make_sim(1 << 20);
  auto a = sim->allocate({.bytes = 600000, .kind = MemoryKind::Weights, .owner = "llama"});
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(sim->allocated_bytes(MemoryKind::Weights), 600000u);
  auto b = sim->allocate({.bytes = 600000, .kind = MemoryKind::Kv, .owner = "qwen"});
  ASSERT_FALSE(b.ok());
  const std::string& msg = b.error().message;
  EXPECT_NE(msg.find("sim0: out of memory: cannot allocate 600000 bytes for 'qwen' (kv)"), std::string::npos)
      << msg;
  EXPECT_NE(msg.find("448512 bytes free of capacity 1048576"), std::string::npos) << msg;
  EXPECT_EQ(sim->memory_info().free, 1048576u - 600064u);
  a->reset();
  EXPECT_EQ(sim->memory_info().free, 1048576u);
  EXPECT_EQ(sim->allocated_bytes(MemoryKind::Weights), 0u);
  EXPECT_TRUE(sim->allocate({.bytes = 600000, .kind = MemoryKind::Kv, .owner = "qwen"}).ok());
}

TEST(SimDevice, FragmentationIsReportedAndCoalescingUndoesIt) {
  auto sim = make_sim(1 << 20);
  std::vector<std::unique_ptr<Buffer>> q;
  for (int i = 0; i < 4; ++i) q.push_back(sim->allocate({.bytes = 256 << 10, .owner = "q"}).value());
  q[0].reset();
  q[2].reset();
  EXPECT_EQ(sim->memory_info().free, 512u << 10);
  auto big = sim->allocate({.bytes = 300 << 10, .owner = "big"});
  ASSERT_FALSE(big.ok());
  EXPECT_NE(big.error().message.find("largest free block 262144"), std::string::npos) << big.error().message;
  q[1].reset();  // joins the two holes
  EXPECT_EQ(sim->largest_free_block().value_or(0), 768u << 10);
  EXPECT_TRUE(sim->allocate({.bytes = 700 << 10, .owner = "big"}).ok());
}

// Freed memory is poisoned: a buffer that takes the place of a freed one reads the pattern, never
// the old bytes (a restore that forgot a copy would otherwise compute right by luck), and so does
// memory never used before. Reading a freed block through a stale address sees it too.
TEST(SimDevice, FreedAndFreshMemoryReadsAsPoison) {
  auto sim = make_sim(1 << 20);
  const std::vector<uint8_t> poison(4096, SimDevice::kPoisonByte);
  std::vector<uint8_t> bytes(4096);
  auto fresh = sim->allocate({.bytes = 4096, .kind = MemoryKind::Weights, .owner = "fresh"});
  ASSERT_TRUE(fresh.ok());
  ASSERT_TRUE((*fresh)->read(0, bytes.data(), bytes.size()).ok());
  EXPECT_EQ(bytes, poison);

  const std::vector<uint8_t> data(4096, 0x3C);
  ASSERT_TRUE((*fresh)->write(0, data.data(), data.size()).ok());
  void* address = (*fresh)->base();
  fresh->reset();
  EXPECT_EQ(std::memcmp(sim->host_address(address, 4096), poison.data(), 4096), 0);  // a stale read
  auto again = sim->allocate({.bytes = 4096, .kind = MemoryKind::Weights, .owner = "again"});
  ASSERT_TRUE(again.ok());
  ASSERT_EQ((*again)->base(), address);  // best fit: the same block
  ASSERT_TRUE((*again)->read(0, bytes.data(), bytes.size()).ok());
  EXPECT_EQ(bytes, poison);
  float f = 0;
  std::memcpy(&f, bytes.data(), sizeof f);
  EXPECT_TRUE(std::isnan(f));  // poisoned floats are NaN
}

TEST(SimDevice, PeakUsedCountsTheHighestUseUntilReset) {
  auto sim = make_sim(1 << 20);
  EXPECT_EQ(sim->peak_used(), 0u);
  auto a = sim->allocate({.bytes = 1000, .owner = "a"});  // one block of 1024
  auto b = sim->allocate({.bytes = 3000, .owner = "b"});  // 3072
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(sim->peak_used(), 4096u);
  b->reset();
  EXPECT_EQ(sim->peak_used(), 4096u);
  sim->reset_peak_used();
  EXPECT_EQ(sim->peak_used(), 1024u);
  auto c = sim->allocate({.bytes = 256, .owner = "c"});
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(sim->peak_used(), 1280u);
}

TEST(SimDevice, ArenaThatDoesNotFitIsAnError) {
  auto sim = make_sim(64 << 10);
  auto rg = test::make_random_graph(*sim, {.seed = 1, .n_ops = 80, .row_counts = {1, 64, 128}});
  ComputeArena arena(*sim, "big-graph");
  ASSERT_TRUE(arena.reserve(rg->graph).ok());
  Status st = arena.allocate();
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.error().message.find("for 'big-graph' (compute)"), std::string::npos) << st.error().message;
}

TEST(SimDevice, UploadDownloadRoundTripAndRangeChecks) {
  auto sim = make_sim(1 << 20);
  auto buf = sim->allocate({.bytes = 4096, .kind = MemoryKind::Kv, .owner = "cache"});
  ASSERT_TRUE(buf.ok());
  EXPECT_FALSE((*buf)->host_visible());
  std::vector<float> v(256);
  for (size_t i = 0; i < v.size(); ++i) v[i] = std::sin(static_cast<float>(i));
  auto view = (*buf)->view(DType::F32, {64, 4, 1, 1}, 1024);
  ASSERT_TRUE(view.ok());
  ASSERT_TRUE(sim->upload(*view, v.data(), v.size() * 4).ok());
  EXPECT_EQ(test::download_f32(*sim, *view), v);
  std::vector<float> part(64);
  ASSERT_TRUE((*buf)->read(1024 + 256, part.data(), 256).ok());
  EXPECT_EQ(part, std::vector<float>(v.begin() + 64, v.begin() + 128));
  ASSERT_TRUE((*buf)->write(4096 - 4, &v[7], 4).ok());
  float back = 0;
  ASSERT_TRUE((*buf)->read(4096 - 4, &back, 4).ok());
  EXPECT_EQ(back, v[7]);

  EXPECT_FALSE((*buf)->write(4096 - 3, v.data(), 4).ok());
  EXPECT_FALSE((*buf)->read(5000, part.data(), 4).ok());
  EXPECT_FALSE((*buf)->view(DType::F32, {64, 4, 1, 1}, 3073).ok());
  Status wrong_size = sim->upload(*view, v.data(), 100);
  ASSERT_FALSE(wrong_size.ok());
  EXPECT_NE(wrong_size.error().message.find("upload of 100 bytes into a view of 1024 bytes"),
            std::string::npos);
  Status host = sim->upload(contiguous_view(DType::F32, {64, 1, 1, 1}, v.data()), v.data(), 256);
  ASSERT_FALSE(host.ok());
  EXPECT_NE(host.error().message.find("not memory of this device"), std::string::npos);
}

TEST(SimDeviceDeathTest, DeviceAddressesFaultOnTheHost) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  auto sim = make_sim(1 << 20);
  auto buf = sim->allocate({.bytes = 64, .owner = "x"});
  ASSERT_TRUE(buf.ok());
  volatile char* p = static_cast<volatile char*>((*buf)->base());
  EXPECT_DEATH({ (void)*p; }, "");
}

TEST(CpuDevice, WrappedMemoryIsNotCopiedAndMayBeReadOnly) {
  CpuDevice cpu;
  std::vector<float> file(128, 3.0f);
  const uint64_t allocations = cpu.allocation_count();
  auto w = cpu.wrap(file.data(), file.size() * 4, MemoryKind::Weights, "llama", /*writable=*/false);
  EXPECT_EQ(w->base(), file.data());
  EXPECT_TRUE(w->host_visible());
  EXPECT_EQ(cpu.allocation_count(), allocations);
  EXPECT_EQ(cpu.allocated_bytes(MemoryKind::Weights), 0u);
  float x = 1.0f;
  Status st = w->write(0, &x, 4);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.error().message.find("read-only"), std::string::npos);
  ASSERT_TRUE(w->read(4, &x, 4).ok());
  EXPECT_EQ(x, 3.0f);
  auto owned = cpu.allocate({.bytes = 1000, .kind = MemoryKind::Kv, .owner = "kv"});
  ASSERT_TRUE(owned.ok());
  EXPECT_EQ(reinterpret_cast<uintptr_t>((*owned)->base()) % CpuDevice::kAlignment, 0u);
  EXPECT_EQ(cpu.allocated_bytes(MemoryKind::Kv), 1000u);
  const MemoryInfo mi = cpu.memory_info();
  EXPECT_GT(mi.total, 0u);
  EXPECT_LE(mi.free, mi.total);
}

}  // namespace
}  // namespace kiln
