#include "runtime/thread_pool.h"

#include <algorithm>

#include "core/check.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace kiln {
namespace {

// Spins before yielding / sleeping: phases are short, but the machine may be oversubscribed.
constexpr int kSpinsBeforeYield = 2048;
constexpr int kSpinsBeforeSleep = 1 << 14;

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  _mm_pause();
#endif
}

}  // namespace

void WorkerContext::barrier() const {
  if (n_threads_ > 1) pool_->barrier_wait();
}

void WorkerContext::for_each_chunk(int64_t n, int64_t grain, FunctionRef<void(int64_t, int64_t)> fn) const {
  KILN_ASSERT(grain >= 1, "for_each_chunk: grain must be positive");
  if (n_threads_ == 1) {
    for (int64_t begin = 0; begin < n; begin += grain) fn(begin, std::min(n, begin + grain));
    return;
  }
  const uint64_t call = chunk_calls_++;
  std::atomic<int64_t>& next = pool_->chunk_next_[call % 2].next;
  if (index_ == 0) pool_->chunk_next_[(call + 1) % 2].next.store(0, std::memory_order_relaxed);
  for (;;) {
    const int64_t begin = next.fetch_add(grain, std::memory_order_relaxed);
    if (begin >= n) return;
    fn(begin, std::min(n, begin + grain));
  }
}

ThreadPool::ThreadPool(int n_threads) {
  if (n_threads <= 0) n_threads = static_cast<int>(std::thread::hardware_concurrency());
  n_threads_ = n_threads > 0 ? n_threads : 1;
  workers_.reserve(static_cast<size_t>(n_threads_ - 1));
  for (int i = 1; i < n_threads_; ++i) workers_.emplace_back([this, i] { worker_main(i); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  wake_.notify_all();
  for (std::thread& t : workers_) t.join();
}

void ThreadPool::barrier_wait() {
  const uint64_t gen = barrier_generation_.load(std::memory_order_acquire);
  if (barrier_arrived_.fetch_add(1, std::memory_order_acq_rel) == n_threads_ - 1) {
    barrier_arrived_.store(0, std::memory_order_relaxed);
    barrier_generation_.fetch_add(1, std::memory_order_acq_rel);
    return;
  }
  for (int spins = 0; barrier_generation_.load(std::memory_order_acquire) == gen; ++spins) {
    if (spins < kSpinsBeforeYield) {
      cpu_relax();
    } else {
      std::this_thread::yield();
    }
  }
}

void ThreadPool::worker_main(int index) {
  uint64_t seen = 0;
  for (;;) {
    for (int spins = 0; spins < kSpinsBeforeSleep && run_generation_.load(std::memory_order_acquire) == seen;
         ++spins) {
      cpu_relax();
    }
    {
      std::unique_lock<std::mutex> lock(mu_);
      wake_.wait(lock, [&] { return stop_ || run_generation_.load(std::memory_order_acquire) != seen; });
      if (stop_) return;
      seen = run_generation_.load(std::memory_order_acquire);
    }
    const WorkerContext ctx(this, index, n_threads_);
    (*fn_)(ctx);
    barrier_wait();  // the run ends when every thread is past fn
  }
}

void ThreadPool::run(FunctionRef<void(const WorkerContext&)> fn) {
  std::lock_guard<std::mutex> run_lock(run_mu_);
  const WorkerContext ctx(this, 0, n_threads_);
  if (n_threads_ == 1) {
    fn(ctx);
    return;
  }
  for (ChunkCounter& c : chunk_next_) c.next.store(0, std::memory_order_relaxed);
  {
    std::lock_guard<std::mutex> lock(mu_);
    fn_ = &fn;
    run_generation_.fetch_add(1, std::memory_order_acq_rel);
  }
  wake_.notify_all();
  fn(ctx);
  barrier_wait();
}

void ThreadPool::parallel_for(int64_t n, FunctionRef<void(int64_t, int64_t)> fn) {
  KILN_ASSERT(n >= 0, "ThreadPool::parallel_for: negative unit count");
  run([&](const WorkerContext& ctx) {
    const auto [begin, end] = ctx.range(n);
    if (begin < end) fn(begin, end);
  });
}

}  // namespace kiln
