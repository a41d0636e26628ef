// Internal to src/ops: the three functions each kernel provides, and small helpers over views.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>

#include "core/half.h"
#include "ops/op.h"

namespace kiln::ops {

// One op's kernel. `check` validates types and shapes (untrusted: model files decide them);
// `plan` and `run` assume `check` passed.
struct KernelFns {
  Status (*check)(const OpCall& call);
  KernelPlan (*plan)(const OpCall& call);
  void (*run)(const OpCall& call, int phase, int64_t begin, int64_t end, void* scratch);
};

// Defined in the kernel's own .cpp file.
extern const KernelFns kGetRowsKernel;
extern const KernelFns kMulMatKernel;
extern const KernelFns kAddKernel;
extern const KernelFns kMulKernel;
extern const KernelFns kScaleKernel;
extern const KernelFns kRmsNormKernel;
extern const KernelFns kLayerNormKernel;
extern const KernelFns kRopeKernel;
extern const KernelFns kSoftMaxKernel;
extern const KernelFns kSiluKernel;
extern const KernelFns kGeluKernel;
extern const KernelFns kSwiGluKernel;
extern const KernelFns kCpyKernel;
extern const KernelFns kConcatKernel;
extern const KernelFns kArgMaxKernel;
extern const KernelFns kAttentionKernel;
extern const KernelFns kGeluQuickKernel;
extern const KernelFns kAvgPool2dKernel;
extern const KernelFns kRmsNormMulKernel;
extern const KernelFns kSetRowsKernel;
extern const KernelFns kGeluErfKernel;
extern const KernelFns kIm2Col1dKernel;
extern const KernelFns kIm2Col2dKernel;
extern const KernelFns kGroupNormKernel;
extern const KernelFns kUpscaleKernel;
extern const KernelFns kTanhKernel;
extern const KernelFns kReluKernel;

// (i1, i2, i3) of flat row r of a view with sizes ne (rows counted over dims 1..3).
struct RowIdx {
  int64_t i1, i2, i3;
};
inline RowIdx row_idx(const TensorView& v, int64_t r) {
  RowIdx idx;
  idx.i1 = r % v.ne[1];
  r /= v.ne[1];
  idx.i2 = r % v.ne[2];
  idx.i3 = r / v.ne[2];
  return idx;
}
inline char* row_ptr(const TensorView& v, int64_t i1, int64_t i2, int64_t i3) {
  return static_cast<char*>(v.data) + i1 * static_cast<int64_t>(v.nb[1]) +
         i2 * static_cast<int64_t>(v.nb[2]) + i3 * static_cast<int64_t>(v.nb[3]);
}
inline char* row_ptr(const TensorView& v, RowIdx r) { return row_ptr(v, r.i1, r.i2, r.i3); }
// Element i0 of a row of a non-quantized view.
template <class T>
inline T& elem(const TensorView& v, char* row, int64_t i0) {
  return *reinterpret_cast<T*>(row + i0 * static_cast<int64_t>(v.nb[0]));
}
// GetRows' and SetRows' row id for row (i1, i2, i3) of the rows they move: ids[i1, i2, i3] of an
// I32 ids tensor [m, a, b].
inline int64_t row_id(const TensorView& ids, RowIdx r) {
  return elem<int32_t>(ids, row_ptr(ids, r.i2, r.i3, 0), r.i1);
}

// One F32, F16 or BF16 element as F32, and back (F16/BF16 rounded as ggml rounds).
inline float load_f32(DType t, const char* p) {
  uint16_t h;
  switch (t) {
    case DType::F16:
      std::memcpy(&h, p, 2);
      return f16_to_f32(h);
    case DType::BF16:
      std::memcpy(&h, p, 2);
      return bf16_to_f32(h);
    default: {
      float f;
      std::memcpy(&f, p, 4);
      return f;
    }
  }
}
inline void store_f32(DType t, char* p, float v) {
  uint16_t h;
  switch (t) {
    case DType::F16:
      h = f32_to_f16(v);
      std::memcpy(p, &h, 2);
      return;
    case DType::BF16:
      h = f32_to_bf16(v);
      std::memcpy(p, &h, 2);
      return;
    default:
      std::memcpy(p, &v, 4);
      return;
  }
}
inline bool is_float_type(DType t) { return t == DType::F32 || t == DType::F16 || t == DType::BF16; }

bool same_shape(const TensorView& a, const TensorView& b);
// ggml_can_repeat: every size of `small` divides the matching size of `big`.
bool can_repeat(const TensorView& small, const TensorView& big);
// "[op] src0 f32 [4, 3, 1, 1]" style description for error messages.
std::string describe(const TensorView& v);
// Errors unless call.n_src is within [min_src, max_src] and those views have data.
Status check_arity(const OpCall& call, int min_src, int max_src);
// Errors unless `v` has type `t`; `what` names it ("src0").
Status check_type(const OpCall& call, const TensorView& v, DType t, const char* what);
// Add's and Mul's operands: src0, src1 and dst F32, dst of src0's shape, src1 repeating over src0
// (ggml_can_repeat). Also RmsNormMul's (norm.cpp).
Status check_binary_broadcast(const OpCall& call);

}  // namespace kiln::ops
