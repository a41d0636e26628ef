#include "runtime/address_reservation.h"

#include <sys/mman.h>

#include <cerrno>
#include <cstring>
#include <utility>

namespace kiln {

AddressReservation::~AddressReservation() { reset(); }

AddressReservation::AddressReservation(AddressReservation&& o) noexcept
    : base_(std::exchange(o.base_, nullptr)), size_(std::exchange(o.size_, 0)) {}

AddressReservation& AddressReservation::operator=(AddressReservation&& o) noexcept {
  if (this != &o) {
    reset();
    base_ = std::exchange(o.base_, nullptr);
    size_ = std::exchange(o.size_, 0);
  }
  return *this;
}

Status AddressReservation::reserve(size_t bytes) {
  reset();
  if (bytes == 0) return make_error("address reservation: no bytes");
  void* p = mmap(nullptr, bytes, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) return make_error("address reservation of ", bytes, " bytes: ", std::strerror(errno));
  base_ = static_cast<uint8_t*>(p);
  size_ = bytes;
  return ok_status();
}

void AddressReservation::reset() {
  if (base_ != nullptr) munmap(base_, size_);
  base_ = nullptr;
  size_ = 0;
}

}  // namespace kiln
