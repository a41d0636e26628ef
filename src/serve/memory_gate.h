// MemoryGate: bytes that work in flight may take together, so that many requests doing large work
// at once cannot take the server's memory: a counting semaphore that never waits (work that does
// not fit now is answered 503, and the client retries). The server has two: one for image decodes
// (ServerOptions::image_decode_bytes, per model) and one for the work a request does before it is
// queued, parsing, rendering and tokenizing (ServerOptions::prequeue_bytes).
// Thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <mutex>

namespace kiln::serve {

class MemoryGate {
 public:
  explicit MemoryGate(size_t capacity) : capacity_(capacity) {}

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

  // `bytes`, when they fit beside the holds in flight; else false and `lease` unchanged.
  bool take(size_t bytes, Lease& lease);
  size_t capacity() const { return capacity_; }
  size_t in_use() const;

 private:
  void give_back(size_t bytes);

  const size_t capacity_;
  mutable std::mutex mu_;
  size_t in_use_ = 0;
};

}  // namespace kiln::serve
