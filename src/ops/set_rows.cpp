// SetRows: dst[:, ids[i, a, b], a, b] = src0[:, i, a, b] converted to dst's type; every other dst
// row keeps its bytes. ref: ggml_compute_forward_set_rows (ggml-cpu/ops.cpp): each row goes through
// the dst type's from_float (F32 and F16 as ggml converts rows; quantized KV types through their
// quantizer, as Cpy does). It writes a batch's K/V rows into the cells the KV cache chose, so that
// a decoder graph does not depend on where they are (plans are reused while the shapes repeat).
// Row ids are data: an id outside [0, dst.ne[1]) writes nothing (callers choose the cells).
// Duplicate ids are a caller error (units run in any order on any thread: one of the rows wins).
// One work unit is one src0 row.
#include <cstdint>

#include "ops/kernel.h"
#include "ops/quant/quant.h"

namespace kiln::ops {
namespace {

Status check_set_rows(const OpCall& call) {
  KILN_TRY(check_arity(call, 2, 2));
  const TensorView& s = call.src[0];
  const TensorView& ids = call.src[1];
  const TensorView& d = call.dst;
  KILN_TRY(check_type(call, s, DType::F32, "src0 (rows)"));
  KILN_TRY(check_type(call, ids, DType::I32, "src1 (row ids)"));
  const QuantTraits* t = quant_traits(d.type);
  if (t == nullptr || t->from_float == nullptr)
    return make_error("[set_rows] no F32 -> ", describe(d), " conversion");
  if (s.nb[0] != sizeof(float) || d.nb[0] != type_size(d.type))
    return make_error("[set_rows] src0 ", describe(s), " and dst ", describe(d), " need contiguous rows");
  if (s.ne[0] != d.ne[0] || ids.ne[0] != s.ne[1] || ids.ne[1] != s.ne[2] || ids.ne[2] != s.ne[3] ||
      ids.ne[3] != 1 || d.ne[2] != s.ne[2] || d.ne[3] != s.ne[3]) {
    return make_error("[set_rows] src0 ", describe(s), ", ids ", describe(ids), " and dst ", describe(d),
                      " do not fit: src0 [n, m, a, b], ids [m, a, b], dst [n, rows, a, b]");
  }
  return ok_status();
}

KernelPlan plan_set_rows(const OpCall& call) {
  KernelPlan p;
  p.units[0] = call.src[0].nrows();
  return p;
}

void run_set_rows(const OpCall& call, int, int64_t begin, int64_t end, void*) {
  const TensorView& s = call.src[0];
  const TensorView& ids = call.src[1];
  const TensorView& d = call.dst;
  const FromFloatFn from_float = quant_traits(d.type)->from_float;
  for (int64_t r = begin; r < end; ++r) {
    const RowIdx ri = row_idx(s, r);
    const int64_t id = row_id(ids, ri);
    if (id < 0 || id >= d.ne[1]) continue;
    from_float(reinterpret_cast<const float*>(row_ptr(s, ri)), row_ptr(d, id, ri.i2, ri.i3), s.ne[0]);
  }
}

}  // namespace

const KernelFns kSetRowsKernel{check_set_rows, plan_set_rows, run_set_rows};

}  // namespace kiln::ops
