// for_each_index_on_threads: every index exactly once, for any count and thread count, and the
// calls really run side by side.
#include "core/index_threads.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

namespace kiln {
namespace {

TEST(IndexThreads, CallsEveryIndexExactlyOnce) {
  for (int64_t n : {0, 1, 2, 7, 1000}) {
    for (int threads : {-1, 0, 1, 3, 64}) {
      std::vector<std::atomic<int>> calls(static_cast<size_t>(n));
      for_each_index_on_threads(n, threads, [&](int64_t i) { calls[static_cast<size_t>(i)].fetch_add(1); });
      for (int64_t i = 0; i < n; ++i)
        EXPECT_EQ(calls[static_cast<size_t>(i)].load(), 1) << n << " " << threads << " " << i;
    }
  }
}

// Index 0's call waits for another thread to take index 1: one thread alone would never return
// (the wait gives up after 30 s and fails).
TEST(IndexThreads, RunsCallsConcurrently) {
  std::atomic<bool> second_started{false};
  std::atomic<bool> saw_concurrency{false};
  const std::thread::id caller = std::this_thread::get_id();
  std::atomic<int> other_threads{0};
  for_each_index_on_threads(2, 2, [&](int64_t i) {
    if (std::this_thread::get_id() != caller) other_threads.fetch_add(1);
    if (i == 1) {
      second_started = true;
      return;
    }
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (!second_started && std::chrono::steady_clock::now() < deadline) std::this_thread::yield();
    saw_concurrency = second_started.load();
  });
  EXPECT_TRUE(saw_concurrency);
  EXPECT_EQ(other_threads.load(), 1);  // the caller took one index, a started thread the other
}

}  // namespace
}  // namespace kiln
