#include "serve/memory_gate.h"

#include <utility>

namespace kiln::serve {

MemoryGate::Lease::Lease(Lease&& other) noexcept
    : owner_(std::exchange(other.owner_, nullptr)), bytes_(std::exchange(other.bytes_, 0)) {}

MemoryGate::Lease& MemoryGate::Lease::operator=(Lease&& other) noexcept {
  if (this != &other) {
    if (owner_ != nullptr) owner_->give_back(bytes_);
    owner_ = std::exchange(other.owner_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
  }
  return *this;
}

MemoryGate::Lease::~Lease() {
  if (owner_ != nullptr) owner_->give_back(bytes_);
}

bool MemoryGate::take(size_t bytes, Lease& lease, std::chrono::milliseconds wait) {
  {
    std::unique_lock lock(mu_);
    if (max_holds_ != 0 &&
        !hold_ended_.wait_for(lock, wait, [&] { return holds_ < max_holds_ || bytes > capacity_ - in_use_; })) {
      return false;
    }
    if (bytes > capacity_ - in_use_) return false;
    in_use_ += bytes;
    ++holds_;
  }
  Lease fresh;
  fresh.owner_ = this;
  fresh.bytes_ = bytes;
  lease = std::move(fresh);
  return true;
}

size_t MemoryGate::in_use() const {
  std::lock_guard lock(mu_);
  return in_use_;
}

size_t MemoryGate::holds() const {
  std::lock_guard lock(mu_);
  return holds_;
}

void MemoryGate::give_back(size_t bytes) {
  {
    std::lock_guard lock(mu_);
    in_use_ -= bytes;
    --holds_;
  }
  hold_ended_.notify_all();
}

}  // namespace kiln::serve
