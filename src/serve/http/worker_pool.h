// WorkerPool: the threads that run route handlers (which may block). A thread starts when a task
// arrives and none is idle, up to max_threads; beyond that tasks wait in arrival order. Idle
// threads stay for the next tasks.
// Thread-safety: post() from any thread; stop() from one thread (not a worker).
#pragma once

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace kiln::serve::http {

class WorkerPool {
 public:
  explicit WorkerPool(size_t max_threads);
  ~WorkerPool();  // stop()
  WorkerPool(const WorkerPool&) = delete;
  WorkerPool& operator=(const WorkerPool&) = delete;

  // Runs `task` on a worker. Dropped after stop().
  void post(std::function<void()> task);
  // Drops the tasks still waiting and joins the threads once their current task returns.
  void stop();

 private:
  void run();

  const size_t max_threads_;
  std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> tasks_;
  std::vector<std::thread> threads_;
  size_t idle_ = 0;
  bool stopping_ = false;
};

}  // namespace kiln::serve::http
