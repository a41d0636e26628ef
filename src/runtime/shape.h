// Small helpers over tensor sizes shared by the graph builder and devices.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "core/dtype.h"
#include "core/tensor_view.h"

namespace kiln {

// Bytes of a contiguous tensor of `type` and sizes `ne`, or nullopt when a size is not positive,
// a row is not whole blocks or the byte count overflows (sizes may come from untrusted files).
std::optional<size_t> contiguous_bytes(DType type, const std::array<int64_t, kMaxDims>& ne);
// "[16, 8, 1, 1]" and "f32 [16, 8, 1, 1]", for messages.
std::string shape_text(const std::array<int64_t, kMaxDims>& ne);
std::string describe_shape(DType type, const std::array<int64_t, kMaxDims>& ne);

}  // namespace kiln
