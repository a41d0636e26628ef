// Test harness for src/ops kernels: host tensors in awkward layouts, a runner that executes an
// OpCall as one range and again split into uneven ranges on several threads (both must agree
// bit for bit), and comparisons against double-precision references.
#pragma once

#include <cstdint>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "core/tensor_view.h"
#include "ops/op.h"

namespace kiln::test {

using Shape4 = std::array<int64_t, kMaxDims>;

// Memory layouts of a test tensor. Quantized types support Contiguous and Padded only;
// Strided0 (every other element) only non-quantized types.
enum class Layout {
  Contiguous,
  Padded,    // gaps after each row, plane and volume
  Permuted,  // dims 1 and 2 swapped in memory (ne[0] still contiguous)
  Strided0,  // nb[0] = 2 elements: a non-contiguous dim 0
};
const char* layout_name(Layout l);

// An owned buffer with a view into it. Bytes outside the view (a front guard and the gaps of
// padded or strided layouts) hold a sentinel pattern, so tests can prove that a kernel wrote only
// inside its dst view; the buffer ends at the view's last byte, so ASan catches overruns.
class HostTensor {
 public:
  HostTensor(DType type, Shape4 ne, Layout layout = Layout::Contiguous);
  HostTensor(const HostTensor&) = delete;
  HostTensor& operator=(const HostTensor&) = delete;

  const TensorView& view() const { return view_; }
  DType type() const { return view_.type; }
  const Shape4& ne() const { return view_.ne; }

  // Element access for F32/F16/BF16/I32 (as double).
  double get(int64_t i0, int64_t i1 = 0, int64_t i2 = 0, int64_t i3 = 0) const;
  void set(int64_t i0, int64_t i1, int64_t i2, int64_t i3, double v);
  // Address of row (i1, i2, i3).
  char* row(int64_t i1, int64_t i2 = 0, int64_t i3 = 0) const;

  // Uniform values in [lo, hi) (rounded to the type) for float and integer types.
  void fill_uniform(std::mt19937& rng, double lo, double hi);
  // For quantized types: quantizes F32 rows `values` [ne0 * nrows] row by row (quantize_chunk).
  void set_quantized(const std::vector<float>& values);

  // Whether every byte outside the view still holds the sentinel.
  bool outside_untouched() const;
  std::vector<uint8_t>& bytes() { return buf_; }

 private:
  std::vector<uint8_t> buf_;
  std::vector<uint8_t> inside_;  // 1 where a byte belongs to an element of the view
  TensorView view_;
};

// Runs `call` once over all units of each phase, then again with the units split into uneven
// ranges executed by 3 threads (a barrier between phases), with garbage-filled scratch both
// times. Fails the current test if the two results differ in any byte of `dst` or if the kernel
// wrote outside dst's view. Requires kernel_supported(call) (reported on failure).
void run_checked(const OpCall& call, HostTensor& dst);

// Makes an OpCall.
OpCall make_call(OpKind kind, const HostTensor& dst, std::vector<const HostTensor*> srcs,
                 OpParams params = {});

// Compares dst (F32) with ref(i0, i1, i2, i3) element-wise: |got - ref| <= atol + rtol * |ref|.
// Reports the first few mismatches with their indices. NaN in ref expects NaN.
void expect_near(const HostTensor& dst, const std::function<double(int64_t, int64_t, int64_t, int64_t)>& ref,
                 double atol, double rtol, const std::string& what);

// F16 / BF16 rounding of a value, computed independently of core/half.h.
float round_f16(float x);
float round_bf16(float x);

}  // namespace kiln::test
