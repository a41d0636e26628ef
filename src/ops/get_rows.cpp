// GetRows: dst[:, i, a, b] = src0[:, ids[i, a, b], a, b] as F32 (embedding lookup).
// ref: ggml_compute_forward_get_rows (ggml-cpu/ops.cpp): quantized rows go through to_float
// (bit-exact dequantization), F16/BF16/F32 rows convert per element.
// Row ids are data (token ids): an id outside [0, src0.ne[1]) never reads out of bounds; its dst
// row is filled with NaN so that the error shows. Callers validate token ids before this op.
// One work unit is one dst row.
#include <cmath>
#include <cstdint>

#include "ops/kernel.h"
#include "ops/quant/quant.h"

namespace kiln::ops {
namespace {

Status check_get_rows(const OpCall& call) {
  KILN_TRY(check_arity(call, 2, 2));
  const TensorView& w = call.src[0];
  const TensorView& ids = call.src[1];
  const TensorView& d = call.dst;
  KILN_TRY(check_type(call, ids, DType::I32, "src1 (row ids)"));
  KILN_TRY(check_type(call, d, DType::F32, "dst"));
  if (!is_float_type(w.type)) {
    const QuantTraits* t = quant_traits(w.type);
    if (t == nullptr || t->to_float == nullptr) return make_error("[get_rows] no to_float for ", describe(w));
    if (d.nb[0] != sizeof(float))
      return make_error("[get_rows] dst rows of ", describe(w), " must be contiguous");
  }
  if (d.ne[0] != w.ne[0] || d.ne[1] != ids.ne[0] || d.ne[2] != ids.ne[1] || d.ne[3] != ids.ne[2] ||
      ids.ne[3] != 1 || w.ne[2] != ids.ne[1] || w.ne[3] != ids.ne[2]) {
    return make_error("[get_rows] src0 ", describe(w), ", ids ", describe(ids), " and dst ", describe(d),
                      " do not fit dst = [src0.ne0, ids.ne0, ids.ne1, ids.ne2]");
  }
  return ok_status();
}

KernelPlan plan_get_rows(const OpCall& call) {
  KernelPlan p;
  p.units[0] = call.dst.nrows();
  return p;
}

void run_get_rows(const OpCall& call, int, int64_t begin, int64_t end, void*) {
  const TensorView& w = call.src[0];
  const TensorView& ids = call.src[1];
  const TensorView& d = call.dst;
  const int64_t n = d.ne[0];
  const ToFloatFn to_float = is_float_type(w.type) ? nullptr : quant_traits(w.type)->to_float;
  for (int64_t r = begin; r < end; ++r) {
    const RowIdx ri = row_idx(d, r);
    char* drow = row_ptr(d, ri);
    const int64_t id = row_id(ids, ri);
    if (id < 0 || id >= w.ne[1]) {
      for (int64_t i0 = 0; i0 < n; ++i0) elem<float>(d, drow, i0) = NAN;
      continue;
    }
    const char* wrow = row_ptr(w, id, ri.i2, ri.i3);
    if (to_float) {
      to_float(wrow, reinterpret_cast<float*>(drow), n);
    } else {
      for (int64_t i0 = 0; i0 < n; ++i0) {
        elem<float>(d, drow, i0) = load_f32(w.type, wrow + i0 * static_cast<int64_t>(w.nb[0]));
      }
    }
  }
}

}  // namespace

const KernelFns kGetRowsKernel{check_get_rows, plan_get_rows, run_get_rows};

}  // namespace kiln::ops
