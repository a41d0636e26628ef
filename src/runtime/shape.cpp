#include "runtime/shape.h"

namespace kiln {

std::optional<size_t> contiguous_bytes(DType type, const std::array<int64_t, kMaxDims>& ne) {
  for (int64_t n : ne) {
    if (n < 1) return std::nullopt;
  }
  if (ne[0] % block_size(type) != 0) return std::nullopt;
  size_t bytes = row_size(type, ne[0]);
  for (int i = 1; i < kMaxDims; ++i) {
    if (__builtin_mul_overflow(bytes, static_cast<size_t>(ne[i]), &bytes)) return std::nullopt;
  }
  return bytes;
}

std::string shape_text(const std::array<int64_t, kMaxDims>& ne) {
  std::string s = "[";
  for (int i = 0; i < kMaxDims; ++i) {
    if (i) s += ", ";
    s += std::to_string(ne[i]);
  }
  return s + "]";
}

std::string describe_shape(DType type, const std::array<int64_t, kMaxDims>& ne) {
  std::string s(dtype_name(type));
  s += ' ';
  s += shape_text(ne);
  return s;
}

}  // namespace kiln
