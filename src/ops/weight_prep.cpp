#include "ops/weight_prep.h"

#include "ops/gemm/gemm.h"
#include "ops/kernel.h"

namespace kiln {

WeightPlacement choose_weight_layout(const TensorView& w) {
  const TensorLayout layout =
      w.layout == TensorLayout::Plain && w.is_contiguous() ? gemm::preferred_layout(w) : TensorLayout::Plain;
  return {layout, gemm::prepared_bytes(w, layout)};
}

Status prepare_weight(const TensorView& w, const WeightPlacement& p, void* dst) {
  if (w.layout != TensorLayout::Plain || !w.is_contiguous())
    return make_error("[prepare_weight] ", ops::describe(w), " is not a contiguous plain tensor");
  if (p.layout != TensorLayout::Plain && p.layout != gemm::preferred_layout(w))
    return make_error("[prepare_weight] layout ", static_cast<int>(p.layout), " does not apply to ",
                      ops::describe(w));
  if (p.bytes != gemm::prepared_bytes(w, p.layout))
    return make_error("[prepare_weight] placement of ", p.bytes, " bytes does not fit ", ops::describe(w));
  gemm::prepare(w, p.layout, dst);
  return ok_status();
}

TensorView prepared_view(const TensorView& w, const WeightPlacement& p, void* data) {
  TensorView v = contiguous_view(w.type, w.ne, data);
  v.layout = p.layout;
  return v;
}

}  // namespace kiln
