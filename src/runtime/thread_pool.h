// ThreadPool: the process's persistent worker threads. N threads take part in every run: the
// caller of run() is thread 0 and N - 1 workers are created once, in the constructor. A run
// allocates nothing and spawns nothing; inside it, WorkerContext::barrier() separates phases
// (a graph runs all its nodes and phases in one run). Kernels receive unit ranges and never see
// threads. A phase's units are shared out either statically (range(): one contiguous share per
// thread) or dynamically (for_each_chunk(): threads claim chunks from a shared counter until none
// is left, so a thread that the machine delays takes fewer; what llama.cpp's CPU backend does).
//
// Thread-safety: run() and parallel_for() may be called from any thread; runs are serialized
// (one at a time per pool). barrier() may only be called by the threads of the current run, and
// every one of them must call it the same number of times.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "runtime/function_ref.h"

namespace kiln {

class ThreadPool;

class WorkerContext {
 public:
  int thread_index() const { return index_; }
  int n_threads() const { return n_threads_; }
  // This thread's share [begin, end) of `n` units: contiguous, disjoint, together exactly [0, n).
  std::pair<int64_t, int64_t> range(int64_t n) const {
    return {n * index_ / n_threads_, n * (index_ + 1) / n_threads_};
  }
  // Dynamic share: calls fn(begin, end) for chunks of at most `grain` (>= 1) units of [0, n)
  // claimed from a counter shared by the run's threads, until every unit is taken; each unit goes
  // to exactly one call. Every thread of the run must make the same sequence of for_each_chunk
  // calls, with a barrier() between two of them (the counters are reused every other call).
  void for_each_chunk(int64_t n, int64_t grain, FunctionRef<void(int64_t begin, int64_t end)> fn) const;
  // Waits until every thread of the run has reached this barrier; writes made before it by any
  // thread are visible after it to all.
  void barrier() const;

 private:
  friend class ThreadPool;
  WorkerContext(ThreadPool* pool, int index, int n_threads)
      : pool_(pool), index_(index), n_threads_(n_threads) {}
  ThreadPool* pool_;
  int index_;
  int n_threads_;
  mutable uint64_t chunk_calls_ = 0;  // for_each_chunk calls made so far in this run
};

class ThreadPool {
 public:
  // n_threads >= 1 counts the caller; 0 means std::thread::hardware_concurrency().
  explicit ThreadPool(int n_threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int n_threads() const { return n_threads_; }

  // Runs fn on every thread of the pool (the caller as thread 0) and returns when all are done.
  void run(FunctionRef<void(const WorkerContext&)> fn);
  // One phase: [0, n) split into one contiguous range per thread; fn(begin, end) per non-empty range.
  void parallel_for(int64_t n, FunctionRef<void(int64_t begin, int64_t end)> fn);

 private:
  friend class WorkerContext;
  void worker_main(int index);
  void barrier_wait();

  int n_threads_;
  std::vector<std::thread> workers_;

  std::mutex run_mu_;  // serializes runs
  std::mutex mu_;      // guards the wake-up below
  std::condition_variable wake_;
  bool stop_ = false;
  std::atomic<uint64_t> run_generation_{0};
  const FunctionRef<void(const WorkerContext&)>* fn_ = nullptr;  // valid during a run

  alignas(64) std::atomic<int> barrier_arrived_{0};
  alignas(64) std::atomic<uint64_t> barrier_generation_{0};
  // for_each_chunk's counters: call c of a run claims from chunk_next_[c % 2]; thread 0 zeroes the
  // other one meanwhile (its last user finished before the barrier that preceded call c).
  struct alignas(64) ChunkCounter {
    std::atomic<int64_t> next{0};
  };
  ChunkCounter chunk_next_[2];
};

}  // namespace kiln
