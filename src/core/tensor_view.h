// TensorView: a non-owning, typed, strided view of up to 4 dimensions, in ggml's convention:
// ne[0] is the innermost (fastest-varying, contiguous when nb[0] == element size) dimension,
// nb[i] is the stride of dimension i in bytes. The memory is owned elsewhere and must outlive
// the view. For quantized types ne[0] is a multiple of the block size, nb[0] is the byte size of
// one block, and rows are only addressed whole (through nb[1..3]).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

#include "core/dtype.h"

namespace kiln {

inline constexpr int kMaxDims = 4;

// How a tensor's bytes are arranged. Plain: ggml's layout, rows of blocks addressed through nb[].
// Other layouts are copies of 2-D weights prepared for a kernel family (ops/weight_prep.h); only
// the kernels written for a layout read it, and nb[] then describes the plain tensor it was made
// from (the prepared bytes are not addressed through it). Byte layouts: ops/gemm/layouts.h.
enum class TensorLayout : uint8_t {
  Plain,
  Q4_0x8,   // Q4_0 rows in groups of eight, quants one row per 32-bit lane (the plain bytes' size)
  Q4_Kx8,   // Q4_K rows in groups of eight, quants one row per 32-bit lane, scales as bytes (+2.8%)
  Q8_0x8,   // Q8_0 rows in groups of eight, quants one row per 32-bit lane (the plain bytes' size)
  Split16,  // F16, BF16 or F32 rows, each 16-value step's two halves apart (the plain bytes' size)
};

struct TensorView {
  DType type = DType::F32;
  TensorLayout layout = TensorLayout::Plain;
  std::array<int64_t, kMaxDims> ne{1, 1, 1, 1};  // elements per dimension
  std::array<size_t, kMaxDims> nb{0, 0, 0, 0};   // bytes per step in each dimension
  void* data = nullptr;                          // non-owning

  int64_t nelements() const { return ne[0] * ne[1] * ne[2] * ne[3]; }
  int64_t nrows() const { return ne[1] * ne[2] * ne[3]; }
  size_t row_bytes() const { return row_size(type, ne[0]); }
  // Bytes spanned from data to one past the last byte addressed.
  size_t span_bytes() const {
    if (nelements() == 0) return 0;
    size_t end = row_bytes();
    for (int i = 1; i < kMaxDims; ++i) end += static_cast<size_t>(ne[i] - 1) * nb[i];
    return end;
  }
  bool is_contiguous() const {
    if (nb[0] != type_size(type)) return false;
    size_t expect = row_bytes();
    for (int i = 1; i < kMaxDims; ++i) {
      if (ne[i] != 1 && nb[i] != expect) return false;
      expect *= static_cast<size_t>(ne[i]);
    }
    return true;
  }
  template <class T>
  T* ptr(int64_t i1 = 0, int64_t i2 = 0, int64_t i3 = 0) const {
    return reinterpret_cast<T*>(static_cast<char*>(data) + i1 * nb[1] + i2 * nb[2] + i3 * nb[3]);
  }
};

// A contiguous view of `type` with the given sizes (ne0 innermost).
inline TensorView contiguous_view(DType type, std::array<int64_t, kMaxDims> ne, void* data) {
  TensorView v;
  v.type = type;
  v.ne = ne;
  v.data = data;
  v.nb[0] = type_size(type);
  v.nb[1] = row_size(type, ne[0]);
  v.nb[2] = v.nb[1] * static_cast<size_t>(ne[1]);
  v.nb[3] = v.nb[2] * static_cast<size_t>(ne[2]);
  return v;
}

}  // namespace kiln
