#include "serve/decode_memory.h"

#include <utility>

namespace kiln::serve {

DecodeMemory::Lease::Lease(Lease&& other) noexcept
    : owner_(std::exchange(other.owner_, nullptr)), bytes_(std::exchange(other.bytes_, 0)) {}

DecodeMemory::Lease& DecodeMemory::Lease::operator=(Lease&& other) noexcept {
  if (this != &other) {
    if (owner_ != nullptr) owner_->give_back(bytes_);
    owner_ = std::exchange(other.owner_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
  }
  return *this;
}

DecodeMemory::Lease::~Lease() {
  if (owner_ != nullptr) owner_->give_back(bytes_);
}

bool DecodeMemory::take(int64_t width, int64_t height, Lease& lease) {
  const auto bytes = static_cast<size_t>(width) * static_cast<size_t>(height) * kBytesPerPixel;
  {
    std::lock_guard lock(mu_);
    if (bytes > capacity_ - in_use_) return false;
    in_use_ += bytes;
  }
  Lease fresh;
  fresh.owner_ = this;
  fresh.bytes_ = bytes;
  lease = std::move(fresh);
  return true;
}

size_t DecodeMemory::in_use() const {
  std::lock_guard lock(mu_);
  return in_use_;
}

void DecodeMemory::give_back(size_t bytes) {
  std::lock_guard lock(mu_);
  in_use_ -= bytes;
}

}  // namespace kiln::serve
