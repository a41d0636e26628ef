// The row loop shared by the chunk quantizers (quantize_<type> with an importance matrix).
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/dtype.h"

namespace kiln::quant {

// Calls quantize_row(row_src, row_dst) for each of nrows rows of n_per_row values of src, with
// row_dst the row's blocks in dst (row_size(t, n_per_row) bytes apart); returns the bytes written.
template <class Block, class F>
size_t for_each_row(DType t, const float* src, void* dst, int64_t nrows, int64_t n_per_row,
                    F&& quantize_row) {
  const size_t rs = row_size(t, n_per_row);
  char* qrow = static_cast<char*>(dst);
  for (int64_t row = 0; row < nrows; ++row) {
    quantize_row(src, reinterpret_cast<Block*>(qrow));
    src += n_per_row;
    qrow += rs;
  }
  return static_cast<size_t>(nrows) * rs;
}

}  // namespace kiln::quant
