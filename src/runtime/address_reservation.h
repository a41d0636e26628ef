// AddressReservation: a range of the process's virtual addresses that no memory backs (an
// inaccessible anonymous mapping, PROT_NONE). Graphs built over memory that is not resident yet
// address it at such a stand-in range, and are relocated to the real memory before they run
// (SplitPlan::relocate): the addresses are unique in the process, so no other memory is mistaken
// for them, and a read through one before the relocation faults at once instead of reading other
// data.
// Ownership: owns the mapping; movable, not copyable. Thread-safety: immutable after reserve().
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/result.h"

namespace kiln {

class AddressReservation {
 public:
  AddressReservation() = default;
  ~AddressReservation();
  AddressReservation(AddressReservation&& o) noexcept;
  AddressReservation& operator=(AddressReservation&& o) noexcept;
  AddressReservation(const AddressReservation&) = delete;
  AddressReservation& operator=(const AddressReservation&) = delete;

  // Reserves `bytes` (> 0) of addresses, replacing any earlier reservation.
  Status reserve(size_t bytes);
  // The first address (null before reserve()) and the size.
  uint8_t* base() const { return base_; }
  size_t size() const { return size_; }

 private:
  void reset();
  uint8_t* base_ = nullptr;
  size_t size_ = 0;
};

}  // namespace kiln
