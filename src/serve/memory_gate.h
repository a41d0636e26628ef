// MemoryGate: bytes that work in flight may take together, so that many requests doing large work
// at once cannot take the server's memory, and optionally how many such works may run at once.
// Bytes never wait (work that does not fit now is answered 503, and the client retries); a full
// count waits a bounded time for a hold to end, so that a burst of small requests queues briefly
// instead of failing. The server has two gates: one for image decodes (ServerOptions::
// image_decode_bytes, per model) and one for the work a request does before it is queued,
// parsing, rendering and tokenizing (ServerOptions::prequeue_bytes and prequeue_jobs).
// Thread-safe.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <mutex>

namespace kiln::serve {

class MemoryGate {
 public:
  // capacity: bytes; max_holds: holds at once (0: any number).
  explicit MemoryGate(size_t capacity, size_t max_holds = 0) : capacity_(capacity), max_holds_(max_holds) {}

  // A hold on some of the capacity, given back when it goes. Movable, not copyable.
  class Lease {
   public:
    Lease() = default;
    Lease(Lease&& other) noexcept;
    Lease& operator=(Lease&& other) noexcept;
    ~Lease();
    size_t bytes() const { return bytes_; }

   private:
    friend class MemoryGate;
    MemoryGate* owner_ = nullptr;
    size_t bytes_ = 0;
  };

  // One hold of `bytes`. False, `lease` unchanged, when the bytes do not fit beside the holds in
  // flight (at once), or when max_holds holds stay in flight for all of `wait` (waiting for one
  // to end; a hold that ends wakes the waiters).
  bool take(size_t bytes, Lease& lease, std::chrono::milliseconds wait = std::chrono::milliseconds(0));
  size_t capacity() const { return capacity_; }
  size_t max_holds() const { return max_holds_; }
  size_t in_use() const;
  size_t holds() const;

 private:
  void give_back(size_t bytes);

  const size_t capacity_;
  const size_t max_holds_;
  mutable std::mutex mu_;
  std::condition_variable hold_ended_;
  size_t in_use_ = 0;
  size_t holds_ = 0;
};

}  // namespace kiln::serve
