#include "ops/weight_prep.h"

#include <cstring>

#include "ops/kernel.h"

namespace kiln {

WeightPlacement choose_weight_layout(const TensorView& w) {
  return {TensorLayout::Plain, w.span_bytes()};
}

Status prepare_weight(const TensorView& w, const WeightPlacement& p, void* dst) {
  if (w.layout != TensorLayout::Plain || !w.is_contiguous())
    return make_error("[prepare_weight] ", ops::describe(w), " is not a contiguous plain tensor");
  if (p.layout != TensorLayout::Plain || p.bytes != w.span_bytes())
    return make_error("[prepare_weight] placement of ", p.bytes, " bytes does not fit ", ops::describe(w));
  std::memcpy(dst, w.data, p.bytes);
  return ok_status();
}

TensorView prepared_view(const TensorView& w, const WeightPlacement& p, void* data) {
  TensorView v = contiguous_view(w.type, w.ne, data);
  v.layout = p.layout;
  return v;
}

}  // namespace kiln
