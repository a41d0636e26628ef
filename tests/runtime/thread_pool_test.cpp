#include "runtime/thread_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <numeric>
#include <thread>
#include <vector>

#include "runtime/alloc_counter.h"

namespace kiln {
namespace {

// Each phase reads what every thread wrote in the previous one: any barrier bug changes the sum.
void many_phases(int n_threads) {
  ThreadPool pool(n_threads);
  constexpr int64_t kN = 97;  // not a multiple of the thread count
  constexpr int kPhases = 1001;
  std::vector<int64_t> a(kN), b(kN);
  std::iota(a.begin(), a.end(), 0);
  std::vector<int64_t> ref = a, tmp(kN);
  for (int p = 0; p < kPhases; ++p) {
    for (int64_t i = 0; i < kN; ++i) tmp[i] = (ref[i] + ref[(i + 1) % kN] * 3 + p) % 1000003;
    ref.swap(tmp);
  }
  pool.run([&](const WorkerContext& ctx) {
    std::vector<int64_t>* in = &a;
    std::vector<int64_t>* out = &b;
    for (int p = 0; p < kPhases; ++p) {
      const auto [begin, end] = ctx.range(kN);
      for (int64_t i = begin; i < end; ++i) (*out)[i] = ((*in)[i] + (*in)[(i + 1) % kN] * 3 + p) % 1000003;
      ctx.barrier();
      std::swap(in, out);
    }
  });
  EXPECT_EQ(kPhases % 2 == 0 ? a : b, ref);
}

// The same phases with units claimed dynamically, in chunks of `grain`, over several runs (the
// claim counters alternate between calls and restart with every run).
void many_chunked_phases(int n_threads, int64_t grain) {
  ThreadPool pool(n_threads);
  constexpr int64_t kN = 97;
  constexpr int kPhases = 301;
  for (int run = 0; run < 3; ++run) {
    std::vector<int64_t> a(kN), b(kN);
    std::iota(a.begin(), a.end(), run);
    std::vector<int64_t> ref = a, tmp(kN);
    for (int p = 0; p < kPhases; ++p) {
      for (int64_t i = 0; i < kN; ++i) tmp[i] = (ref[i] + ref[(i + 1) % kN] * 3 + p) % 1000003;
      ref.swap(tmp);
    }
    std::vector<std::atomic<int>> hits(kN);
    pool.run([&](const WorkerContext& ctx) {
      std::vector<int64_t>* in = &a;
      std::vector<int64_t>* out = &b;
      for (int p = 0; p < kPhases; ++p) {
        ctx.for_each_chunk(kN, grain, [&](int64_t begin, int64_t end) {
          EXPECT_LE(end - begin, grain);
          for (int64_t i = begin; i < end; ++i) {
            (*out)[i] = ((*in)[i] + (*in)[(i + 1) % kN] * 3 + p) % 1000003;
            hits[static_cast<size_t>(i)].fetch_add(1, std::memory_order_relaxed);
          }
        });
        ctx.barrier();
        std::swap(in, out);
      }
    });
    EXPECT_EQ(kPhases % 2 == 0 ? a : b, ref) << "run " << run;
    for (int64_t i = 0; i < kN; ++i) ASSERT_EQ(hits[static_cast<size_t>(i)].load(), kPhases) << "unit " << i;
  }
}

TEST(ThreadPool, ChunkedPhasesCoverUnitsOnceOneThread) { many_chunked_phases(1, 5); }
TEST(ThreadPool, ChunkedPhasesCoverUnitsOnceTwoThreads) { many_chunked_phases(2, 1); }
TEST(ThreadPool, ChunkedPhasesCoverUnitsOnceFourThreads) { many_chunked_phases(4, 7); }
TEST(ThreadPool, ChunkedPhasesWithOneBigChunk) { many_chunked_phases(3, 1000); }

TEST(ThreadPool, ManySmallPhasesOneThread) { many_phases(1); }
TEST(ThreadPool, ManySmallPhasesTwoThreads) { many_phases(2); }
TEST(ThreadPool, ManySmallPhasesFourThreads) { many_phases(4); }

TEST(ThreadPool, RangesCoverUnitsExactlyOnce) {
  ThreadPool pool(3);
  for (int64_t n : {0, 1, 2, 3, 5, 64, 1001}) {
    std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
    pool.parallel_for(n, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) hits[static_cast<size_t>(i)].fetch_add(1);
    });
    for (int64_t i = 0; i < n; ++i)
      ASSERT_EQ(hits[static_cast<size_t>(i)].load(), 1) << "n=" << n << " i=" << i;
  }
}

TEST(ThreadPool, ManyRunsAllocateNothingAndCountEveryThread) {
  ThreadPool pool(3);
  std::atomic<int64_t> total{0};
  pool.parallel_for(10, [&](int64_t, int64_t) {});  // warm
  test::CountAllocations count;
  for (int r = 0; r < 300; ++r) {
    pool.run([&](const WorkerContext& ctx) { total.fetch_add(ctx.thread_index() + 1); });
  }
  EXPECT_EQ(count.count(), 0);
  EXPECT_EQ(total.load(), 300 * (1 + 2 + 3));
}

TEST(ThreadPool, ConcurrentCallersAreSerialized) {
  ThreadPool pool(2);
  std::vector<int64_t> sums(4, 0);
  std::vector<std::thread> callers;
  for (int c = 0; c < 4; ++c) {
    callers.emplace_back([&, c] {
      for (int r = 0; r < 100; ++r) {
        std::vector<int64_t> part(2, 0);
        pool.run([&](const WorkerContext& ctx) {
          const auto [b, e] = ctx.range(100);
          for (int64_t i = b; i < e; ++i) part[static_cast<size_t>(ctx.thread_index())] += i;
          ctx.barrier();
        });
        sums[static_cast<size_t>(c)] += part[0] + part[1];
      }
    });
  }
  for (std::thread& t : callers) t.join();
  for (int64_t s : sums) EXPECT_EQ(s, 100 * 4950);
}

}  // namespace
}  // namespace kiln
