#include "models/weight_binder.h"

namespace kiln {
namespace {

std::string shape_text(const std::array<int64_t, kMaxDims>& ne, size_t n_dims) {
  std::string s = "[";
  for (size_t i = 0; i < n_dims; ++i) s += (i ? ", " : "") + std::to_string(ne[i]);
  return s + "]";
}

}  // namespace

Result<Weight> WeightBinder::required(const std::string& name, std::initializer_list<int64_t> ne) const {
  const GgufTensorInfo* t = file_.find_tensor(name);
  if (t == nullptr) return make_error(what_, ": missing tensor '", name, "'");
  return check(t, ne);
}

Result<Weight> WeightBinder::optional(const std::string& name, std::initializer_list<int64_t> ne) const {
  const GgufTensorInfo* t = file_.find_tensor(name);
  if (t == nullptr) return Weight{};
  return check(t, ne);
}

int64_t WeightBinder::out_width(const std::string& name) const {
  const GgufTensorInfo* t = file_.find_tensor(name);
  return t != nullptr && t->n_dims >= 2 ? t->ne[1] : 0;
}

Result<Weight> WeightBinder::check(const GgufTensorInfo* t, std::initializer_list<int64_t> ne) const {
  KILN_ASSERT(ne.size() >= 1 && ne.size() <= kMaxDims, "WeightBinder: 1 to 4 sizes");
  std::array<int64_t, kMaxDims> want{1, 1, 1, 1};
  std::copy(ne.begin(), ne.end(), want.begin());
  if (t->ne != want)
    return make_error(what_, ": tensor '", t->name, "' has shape ", shape_text(t->ne, static_cast<size_t>(t->n_dims)),
                      ", expected ", shape_text(want, ne.size()));
  return Weight{t, file_.tensor_view(*t)};
}

}  // namespace kiln
