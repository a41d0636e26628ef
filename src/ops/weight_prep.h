// Weights prepared for the kernels of the CPU in hand.
//
// A model's weights reach the kernels either as the plain GGUF bytes or as a copy in a layout a
// kernel family reads faster (rows interleaved, scales converted: TensorLayout). Preparing is a
// pure function of the plain bytes: the same input gives the same prepared bytes on every run, so
// a prepared buffer needs no copy of its own to be evicted: the mapped file is its shadow, and
// restoring it means preparing again (bit-identical).
//
// Usage, per 2-D weight `w` (plain, host-addressable):
//   WeightPlacement p = choose_weight_layout(w);      // layout + bytes for this CPU
//   KILN_TRY(prepare_weight(w, p, dst));              // dst: p.bytes of host memory
//   TensorView v = prepared_view(w, p, device_addr);  // what the graph's mul_mat reads
// Thread-safety: all functions are pure; prepare_weight may run concurrently on distinct dst.
#pragma once

#include <cstddef>

#include "core/result.h"
#include "core/tensor_view.h"

namespace kiln {

struct WeightPlacement {
  TensorLayout layout = TensorLayout::Plain;
  size_t bytes = 0;  // bytes of the prepared copy
};

// The layout this CPU's kernels read `w` fastest in, and its size. Plain (w's contiguous bytes)
// for tensors no kernel prepares.
WeightPlacement choose_weight_layout(const TensorView& w);

// Writes `w` (contiguous, plain, host-addressable) in layout p.layout to dst (p.bytes). An Error
// when `w` is not contiguous and plain or the layout does not apply to it.
Status prepare_weight(const TensorView& w, const WeightPlacement& p, void* dst);

// The view the kernels read of a prepared copy of `w` at `data` (a device address): w's type and
// sizes, p.layout, contiguous plain strides.
TensorView prepared_view(const TensorView& w, const WeightPlacement& p, void* data);

}  // namespace kiln
