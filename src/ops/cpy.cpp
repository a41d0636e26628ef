// Cpy: dst = src0 converted to dst's type. ref: ggml_compute_forward_dup / ggml_compute_forward_cpy
// (ggml-cpu/ops.cpp).
//   float -> float (F32/F16/BF16, any pair): any shapes of equal element count, any strides;
//     elements pair up in row-major order (dim 0 fastest), as ggml_cpy does.
//   F32 -> quantized (Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL, ... every quant_traits type with a
//     from_float): same shape, src rows contiguous; each row goes through from_float as ggml's
//     CPU backend quantizes a KV cache row (for Q8_0 the rounding of its SIMD quantizer).
//   quantized -> F32: same shape, dst rows contiguous, through to_float.
// One work unit is one dst row.
#include <cstdint>
#include <cstring>

#include "ops/kernel.h"
#include "ops/quant/quant.h"

namespace kiln::ops {
namespace {

Status check_cpy(const OpCall& call) {
  KILN_TRY(check_arity(call, 1, 1));
  const TensorView& s = call.src[0];
  const TensorView& d = call.dst;
  if (is_float_type(s.type) && is_float_type(d.type)) {
    if (s.nelements() != d.nelements()) {
      return make_error("[cpy] src0 ", describe(s), " and dst ", describe(d), " differ in element count");
    }
    return ok_status();
  }
  if (!same_shape(s, d)) {
    return make_error("[cpy] src0 ", describe(s), " -> dst ", describe(d),
                      ": a quantized copy needs one shape");
  }
  if (s.type == DType::F32) {
    const QuantTraits* t = quant_traits(d.type);
    if (t == nullptr || t->from_float == nullptr || !info(d.type).quantized) {
      return make_error("[cpy] no F32 -> ", dtype_name(d.type), " conversion");
    }
    if (s.nb[0] != sizeof(float))
      return make_error("[cpy] F32 -> ", dtype_name(d.type), " needs contiguous src0 rows");
    return ok_status();
  }
  if (d.type == DType::F32) {
    const QuantTraits* t = quant_traits(s.type);
    if (t == nullptr || t->to_float == nullptr)
      return make_error("[cpy] no ", dtype_name(s.type), " -> F32 conversion");
    if (d.nb[0] != sizeof(float))
      return make_error("[cpy] ", dtype_name(s.type), " -> F32 needs contiguous dst rows");
    return ok_status();
  }
  return make_error("[cpy] no ", dtype_name(s.type), " -> ", dtype_name(d.type), " conversion");
}

KernelPlan plan_cpy(const OpCall& call) {
  KernelPlan p;
  p.units[0] = call.dst.nrows();
  return p;
}

// Flat element index -> address in a view.
char* flat_elem(const TensorView& v, int64_t flat) {
  const int64_t i0 = flat % v.ne[0];
  flat /= v.ne[0];
  const int64_t i1 = flat % v.ne[1];
  flat /= v.ne[1];
  const int64_t i2 = flat % v.ne[2];
  const int64_t i3 = flat / v.ne[2];
  return row_ptr(v, i1, i2, i3) + i0 * static_cast<int64_t>(v.nb[0]);
}

using RowCopyFn = void (*)(const char* src, char* dst, int64_t n);

// A whole-row conversion for float rows that are contiguous on both sides: F32 <-> F16 through the
// F16 type's to_float / from_float (SIMD where the CPU has it; the values of load_f32 / store_f32
// element by element), one type to itself by memcpy (as ggml's dup: a NaN's payload is kept where
// a round trip through F32 would quiet it); nullptr for other pairs (element by element).
RowCopyFn contiguous_row_copy(const TensorView& s, const TensorView& d) {
  if (s.nb[0] != type_size(s.type) || d.nb[0] != type_size(d.type)) return nullptr;
  if (s.type == d.type) {
    if (s.type == DType::F32) return [](const char* x, char* y, int64_t n) { std::memcpy(y, x, 4 * n); };
    return [](const char* x, char* y, int64_t n) { std::memcpy(y, x, 2 * n); };  // F16, BF16
  }
  if (s.type == DType::F32 && d.type == DType::F16)
    return [](const char* x, char* y, int64_t n) {
      quant_traits(DType::F16)->from_float(reinterpret_cast<const float*>(x), y, n);
    };
  if (s.type == DType::F16 && d.type == DType::F32)
    return [](const char* x, char* y, int64_t n) {
      quant_traits(DType::F16)->to_float(x, reinterpret_cast<float*>(y), n);
    };
  return nullptr;
}

void run_cpy(const OpCall& call, int, int64_t begin, int64_t end, void*) {
  const TensorView& s = call.src[0];
  const TensorView& d = call.dst;
  const int64_t n0 = d.ne[0];
  if (is_float_type(s.type) && is_float_type(d.type)) {
    const bool shaped = same_shape(s, d);
    const RowCopyFn row_copy = contiguous_row_copy(s, d);
    for (int64_t r = begin; r < end; ++r) {
      const RowIdx ri = row_idx(d, r);
      char* drow = row_ptr(d, ri);
      if (shaped) {
        const char* srow = row_ptr(s, ri);
        if (row_copy) {
          row_copy(srow, drow, n0);
          continue;
        }
        for (int64_t i0 = 0; i0 < n0; ++i0) {
          store_f32(d.type, drow + i0 * static_cast<int64_t>(d.nb[0]),
                    load_f32(s.type, srow + i0 * static_cast<int64_t>(s.nb[0])));
        }
      } else {
        for (int64_t i0 = 0; i0 < n0; ++i0) {
          store_f32(d.type, drow + i0 * static_cast<int64_t>(d.nb[0]),
                    load_f32(s.type, flat_elem(s, r * n0 + i0)));
        }
      }
    }
    return;
  }
  if (s.type == DType::F32) {
    const FromFloatFn from_float = quant_traits(d.type)->from_float;
    for (int64_t r = begin; r < end; ++r) {
      const RowIdx ri = row_idx(d, r);
      from_float(reinterpret_cast<const float*>(row_ptr(s, ri)), row_ptr(d, ri), n0);
    }
    return;
  }
  const ToFloatFn to_float = quant_traits(s.type)->to_float;
  for (int64_t r = begin; r < end; ++r) {
    const RowIdx ri = row_idx(d, r);
    to_float(row_ptr(s, ri), reinterpret_cast<float*>(row_ptr(d, ri)), n0);
  }
}

}  // namespace

const KernelFns kCpyKernel{check_cpy, plan_cpy, run_cpy};

}  // namespace kiln::ops
