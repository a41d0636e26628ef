// Row-shaped small kernels: ArgMax (per row) and Concat (along any axis).
#include <cmath>
#include <cstdint>
#include <cstring>

#include "ops/kernel.h"

namespace kiln::ops {
namespace {

KernelPlan plan_rows(const OpCall& call) {
  KernelPlan p;
  p.units[0] = call.dst.nrows();
  return p;
}

Status check_argmax(const OpCall& call) {
  KILN_TRY(check_arity(call, 1, 1));
  KILN_TRY(check_type(call, call.src[0], DType::F32, "src0"));
  KILN_TRY(check_type(call, call.dst, DType::I32, "dst"));
  const TensorView& s = call.src[0];
  const TensorView& d = call.dst;
  if (d.ne[0] != s.nrows() || d.nrows() != 1) {
    return make_error("[argmax] dst ", describe(d), " must be [", s.nrows(), "] for src0 ", describe(s));
  }
  return ok_status();
}

// ArgMax's units are rows of src0 (dst is one row of results). ref: ggml_compute_forward_argmax_f32
// (first index of the maximum; NaNs never compare greater).
KernelPlan plan_argmax(const OpCall& call) {
  KernelPlan p;
  p.units[0] = call.src[0].nrows();
  return p;
}

void run_argmax(const OpCall& call, int, int64_t begin, int64_t end, void*) {
  const TensorView& s = call.src[0];
  const TensorView& d = call.dst;
  for (int64_t r = begin; r < end; ++r) {
    char* x = row_ptr(s, row_idx(s, r));
    float best = -INFINITY;
    int32_t idx = 0;
    for (int64_t i = 0; i < s.ne[0]; ++i) {
      const float v = elem<float>(s, x, i);
      if (v > best) {
        best = v;
        idx = static_cast<int32_t>(i);
      }
    }
    elem<int32_t>(d, static_cast<char*>(d.data), r) = idx;
  }
}

// ref: ggml_concat: every size equal except along axis, where dst = src0 + src1.
Status check_concat(const OpCall& call) {
  KILN_TRY(check_arity(call, 2, 2));
  const int axis = call.params.axis;
  if (axis < 0 || axis >= kMaxDims) return make_error("[concat] axis ", axis, " is outside [0, 3]");
  const TensorView& a = call.src[0];
  const TensorView& b = call.src[1];
  const TensorView& d = call.dst;
  for (const TensorView* v : {&a, &b, &d}) {
    if (!is_float_type(v->type)) return make_error("[concat] ", describe(*v), " is not f32, f16 or bf16");
  }
  for (int i = 0; i < kMaxDims; ++i) {
    const bool ok = i == axis ? d.ne[i] == a.ne[i] + b.ne[i] : (a.ne[i] == d.ne[i] && b.ne[i] == d.ne[i]);
    if (!ok) {
      return make_error("[concat] src0 ", describe(a), " and src1 ", describe(b),
                        " do not concatenate along axis ", axis, " into dst ", describe(d));
    }
  }
  return ok_status();
}

// The source of dst element idx (idx rewritten to the element's index in it).
const TensorView& concat_source(const OpCall& call, int64_t idx[kMaxDims]) {
  const TensorView& a = call.src[0];
  const int axis = call.params.axis;
  if (idx[axis] < a.ne[axis]) return a;
  idx[axis] -= a.ne[axis];
  return call.src[1];
}

void run_concat(const OpCall& call, int, int64_t begin, int64_t end, void*) {
  const TensorView& a = call.src[0];
  const TensorView& b = call.src[1];
  const TensorView& d = call.dst;
  // Along an outer axis each dst row is one source row: copied whole where the types agree and
  // rows are contiguous (the strips of a large SD convolution, models/sd/sd_layers.h).
  const bool whole_rows = call.params.axis != 0 && a.type == d.type && b.type == d.type &&
                          d.nb[0] == type_size(d.type) && a.nb[0] == d.nb[0] && b.nb[0] == d.nb[0];
  for (int64_t r = begin; r < end; ++r) {
    const RowIdx ri = row_idx(d, r);
    char* drow = row_ptr(d, ri);
    if (whole_rows) {
      int64_t idx[kMaxDims] = {0, ri.i1, ri.i2, ri.i3};
      const TensorView& src = concat_source(call, idx);
      std::memcpy(drow, row_ptr(src, idx[1], idx[2], idx[3]), static_cast<size_t>(d.ne[0]) * d.nb[0]);
      continue;
    }
    for (int64_t i0 = 0; i0 < d.ne[0]; ++i0) {
      int64_t idx[kMaxDims] = {i0, ri.i1, ri.i2, ri.i3};
      const TensorView& src = concat_source(call, idx);
      const char* p = row_ptr(src, idx[1], idx[2], idx[3]) + idx[0] * static_cast<int64_t>(src.nb[0]);
      store_f32(d.type, drow + i0 * static_cast<int64_t>(d.nb[0]), load_f32(src.type, p));
    }
  }
}

}  // namespace

const KernelFns kArgMaxKernel{check_argmax, plan_argmax, run_argmax};
const KernelFns kConcatKernel{check_concat, plan_rows, run_concat};

}  // namespace kiln::ops
