// DecodeMemory: the bytes that image decodes in flight may take together, so that many requests
// carrying large images at once cannot take the server's memory (a counting semaphore that never
// waits: an image that does not fit now is answered 503, and the client retries).
// Thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <mutex>

namespace kiln::serve {

class DecodeMemory {
 public:
  // What one pixel of an image being decoded may cost: its RGB bytes (3), a JPEG's component
  // planes (up to 4) and libjpeg's coefficients of a progressive file (up to 8), rounded up.
  static constexpr int64_t kBytesPerPixel = 16;

  explicit DecodeMemory(size_t capacity) : capacity_(capacity) {}

  // A hold on some of the capacity, given back when it goes. Movable, not copyable.
  class Lease {
   public:
    Lease() = default;
    Lease(Lease&& other) noexcept;
    Lease& operator=(Lease&& other) noexcept;
    ~Lease();
    size_t bytes() const { return bytes_; }

   private:
    friend class DecodeMemory;
    DecodeMemory* owner_ = nullptr;
    size_t bytes_ = 0;
  };

  // The bytes of a width x height decode, when they fit beside the holds in flight; else false
  // and `lease` unchanged.
  bool take(int64_t width, int64_t height, Lease& lease);
  size_t capacity() const { return capacity_; }
  size_t in_use() const;

 private:
  void give_back(size_t bytes);

  const size_t capacity_;
  mutable std::mutex mu_;
  size_t in_use_ = 0;
};

}  // namespace kiln::serve
