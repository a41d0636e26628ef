// Software prefetch of weight streams in the one-token kernels. A one-token product reads each
// weight byte once and does little work per byte; on the AVX-512 machine of docs/performance.md
// (AMD EPYC, Zen 4) the hardware prefetchers alone kept these kernels stalled on their weight loads
// (Q4_K decode at half the streaming rate). Asking for the line kWeightPrefetchBytes ahead of the
// one being read (1 KiB measured best of 384 B .. 4 KiB) keeps enough of the stream in flight.
// (That was measured while the prepared eight-row layouts read their scales and quants as two
// streams; stored as one stream (gemm/layouts.h) they run as fast without it, and take none.)
// Harmless past a buffer's end (a prefetch never faults). Any ISA; internal linkage, so that no copy
// compiled for one ISA stands in for another file's.
#pragma once

#include <cstddef>

namespace kiln::quant {
namespace {  // NOLINT: internal linkage on purpose (see above)

inline constexpr size_t kWeightPrefetchBytes = 1024;

// Prefetches every cache line of the kBytes at p (not line-aligned: its last byte's line too).
template <size_t kBytes>
inline void prefetch_block(const void* p) {
  const char* c = static_cast<const char*>(p);
  for (size_t b = 0; b < kBytes; b += 64) __builtin_prefetch(c + b, 0, 3);
  if constexpr (kBytes % 64 != 0) __builtin_prefetch(c + kBytes - 1, 0, 3);
}

// For a block of kBytes of weights about to be read from p (kernels that read a row, or a prepared
// group, block by block): prefetches the lines kWeightPrefetchBytes further on.
template <size_t kBytes>
inline void prefetch_weight_block(const void* p) {
  prefetch_block<kBytes>(static_cast<const char*>(p) + kWeightPrefetchBytes);
}

}  // namespace
}  // namespace kiln::quant
