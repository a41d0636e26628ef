#include "serve/http/worker_pool.h"

#include "core/check.h"

namespace kiln::serve::http {

WorkerPool::WorkerPool(size_t max_threads) : max_threads_(max_threads) {
  KILN_ASSERT(max_threads >= 1, "WorkerPool: no threads");
}

WorkerPool::~WorkerPool() { stop(); }

void WorkerPool::post(std::function<void()> task) {
  {
    std::lock_guard lock(mutex_);
    if (stopping_) return;
    tasks_.push_back(std::move(task));
    if (idle_ < tasks_.size() && threads_.size() < max_threads_) threads_.emplace_back([this] { run(); });
  }
  cv_.notify_one();
}

void WorkerPool::run() {
  std::unique_lock lock(mutex_);
  for (;;) {
    ++idle_;
    cv_.wait(lock, [&] { return stopping_ || !tasks_.empty(); });
    --idle_;
    if (stopping_) return;
    std::function<void()> task = std::move(tasks_.front());
    tasks_.pop_front();
    lock.unlock();
    task();
    task = nullptr;  // whatever the task captured is released outside the lock
    lock.lock();
  }
}

void WorkerPool::stop() {
  std::vector<std::thread> threads;
  std::deque<std::function<void()>> dropped;
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
    dropped.swap(tasks_);
    threads.swap(threads_);
  }
  cv_.notify_all();
  dropped.clear();
  for (auto& t : threads) t.join();
}

}  // namespace kiln::serve::http
