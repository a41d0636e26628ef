#include "runtime/device.h"

#include <cstring>

#include "runtime/shape.h"

namespace kiln {

const char* memory_kind_name(MemoryKind kind) {
  switch (kind) {
    case MemoryKind::Weights:
      return "weights";
    case MemoryKind::Kv:
      return "kv";
    case MemoryKind::Compute:
      return "compute";
    case MemoryKind::Scratch:
      return "scratch";
  }
  return "unknown";
}

Result<TensorView> Buffer::view(DType type, std::array<int64_t, kMaxDims> ne, size_t offset) const {
  const std::optional<size_t> bytes = contiguous_bytes(type, ne);
  if (!bytes) return make_error("buffer '", owner_, "': invalid view shape ", describe_shape(type, ne));
  if (offset > size_ || *bytes > size_ - offset) {
    return make_error("buffer '", owner_, "': view ", describe_shape(type, ne), " of ", *bytes,
                      " bytes at offset ", offset, " exceeds buffer size ", size_);
  }
  return contiguous_view(type, ne, static_cast<char*>(base_) + offset);
}

Status Buffer::write(size_t offset, const void* src, size_t n) {
  if (!writable_) return make_error("buffer '", owner_, "': write to read-only memory");
  if (offset > size_ || n > size_ - offset) {
    return make_error("buffer '", owner_, "': write [", offset, ", ", offset + n, ") past size ", size_);
  }
  if (n == 0) return ok_status();
  return device_->copy_in(static_cast<char*>(base_) + offset, src, n);
}

Status Buffer::read(size_t offset, void* dst, size_t n) const {
  if (offset > size_ || n > size_ - offset) {
    return make_error("buffer '", owner_, "': read [", offset, ", ", offset + n, ") past size ", size_);
  }
  if (n == 0) return ok_status();
  return device_->copy_out(static_cast<char*>(base_) + offset, dst, n);
}

Status Device::upload(const TensorView& dst, const void* src, size_t n) {
  if (!dst.is_contiguous()) return make_error(name(), ": upload to a non-contiguous view");
  const size_t bytes = dst.span_bytes();
  if (n != bytes) return make_error(name(), ": upload of ", n, " bytes into a view of ", bytes, " bytes");
  if (n == 0) return ok_status();
  if (!holds(dst.data, n))
    return make_error(name(), ": upload destination (", n, " bytes) is not memory of this device");
  return copy_in(dst.data, src, n);
}

Status Device::download(const TensorView& src, void* dst, size_t n) const {
  if (!src.is_contiguous()) return make_error(name(), ": download from a non-contiguous view");
  const size_t bytes = src.span_bytes();
  if (n != bytes) return make_error(name(), ": download of ", n, " bytes from a view of ", bytes, " bytes");
  if (n == 0) return ok_status();
  if (!holds(src.data, n))
    return make_error(name(), ": download source (", n, " bytes) is not memory of this device");
  return copy_out(src.data, dst, n);
}

Status Device::copy_in(void* dst, const void* src, size_t n) {
  void* host = host_address(dst, n);
  KILN_ASSERT(host != nullptr, "Device::copy_in: range not in the device's memory");
  std::memcpy(host, src, n);
  return ok_status();
}

Status Device::copy_out(const void* src, void* dst, size_t n) const {
  const void* host = host_address(src, n);
  KILN_ASSERT(host != nullptr, "Device::copy_out: range not in the device's memory");
  std::memcpy(dst, host, n);
  return ok_status();
}

void Device::note_allocated(MemoryKind kind, size_t bytes) {
  allocated_[static_cast<int>(kind)].fetch_add(bytes, std::memory_order_relaxed);
  allocation_count_.fetch_add(1, std::memory_order_relaxed);
}

void Device::note_freed(MemoryKind kind, size_t bytes) {
  allocated_[static_cast<int>(kind)].fetch_sub(bytes, std::memory_order_relaxed);
}

}  // namespace kiln
