// WeightBinder: binds a model file's tensors by name as Weights (models/modules.h), checking each
// tensor's shape against what the hyperparameters imply. Errors name the tensor and both shapes:
// "model: tensor 'blk.0.attn_q.weight' has shape [64, 32], expected [64, 64]" (`what` prefixes
// the message: "model", "mmproj"). Non-owning: the file must outlive the binder and its Weights.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>

#include "core/gguf.h"
#include "core/result.h"
#include "models/modules.h"

namespace kiln {

class WeightBinder {
 public:
  WeightBinder(const GgufFile& file, std::string what) : file_(file), what_(std::move(what)) {}

  // `ne` lists the expected sizes, innermost first; trailing dimensions are 1.
  Result<Weight> required(const std::string& name, std::initializer_list<int64_t> ne) const;
  // An absent tensor gives an empty Weight; a present one must have the expected shape.
  Result<Weight> optional(const std::string& name, std::initializer_list<int64_t> ne) const;
  // The output width (ne[1]) of a 2-D or larger tensor `name`, or 0 when it is absent or 1-D: for
  // widths the hyperparameters do not give (a projector's hidden width), checked when bound.
  int64_t out_width(const std::string& name) const;
  const GgufFile& file() const { return file_; }

 private:
  Result<Weight> check(const GgufTensorInfo* t, std::initializer_list<int64_t> ne) const;
  const GgufFile& file_;
  std::string what_;
};

}  // namespace kiln
