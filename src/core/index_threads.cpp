#include "core/index_threads.h"

#include <algorithm>
#include <atomic>
#include <thread>
#include <vector>

namespace kiln {

void for_each_index_on_threads(int64_t n, int n_threads, const std::function<void(int64_t i)>& fn) {
  if (n_threads <= 0) n_threads = std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  std::atomic<int64_t> next{0};
  auto work = [&] {
    for (int64_t i = next.fetch_add(1); i < n; i = next.fetch_add(1)) fn(i);
  };
  const int64_t n_workers = std::clamp<int64_t>(n_threads, 1, std::max<int64_t>(n, 1));
  std::vector<std::thread> workers;
  workers.reserve(static_cast<size_t>(n_workers - 1));
  for (int64_t t = 1; t < n_workers; ++t) workers.emplace_back(work);
  work();
  for (std::thread& w : workers) w.join();
}

}  // namespace kiln
