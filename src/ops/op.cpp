// The dispatcher behind op.h: every OpKind maps to one KernelFns (ops/kernel.h).
#include "ops/op.h"

#include <string>

#include "ops/kernel.h"

namespace kiln {
namespace {

// The kernel of an op (check_kernel has rejected unknown kinds before this is called).
const ops::KernelFns& kernel_of(OpKind k) {
  switch (k) {
    case OpKind::GetRows:
      return ops::kGetRowsKernel;
    case OpKind::MulMat:
      return ops::kMulMatKernel;
    case OpKind::Add:
      return ops::kAddKernel;
    case OpKind::Mul:
      return ops::kMulKernel;
    case OpKind::Scale:
      return ops::kScaleKernel;
    case OpKind::RmsNorm:
      return ops::kRmsNormKernel;
    case OpKind::LayerNorm:
      return ops::kLayerNormKernel;
    case OpKind::Rope:
      return ops::kRopeKernel;
    case OpKind::SoftMax:
      return ops::kSoftMaxKernel;
    case OpKind::Silu:
      return ops::kSiluKernel;
    case OpKind::Gelu:
      return ops::kGeluKernel;
    case OpKind::SwiGlu:
      return ops::kSwiGluKernel;
    case OpKind::Cpy:
      return ops::kCpyKernel;
    case OpKind::Concat:
      return ops::kConcatKernel;
    case OpKind::ArgMax:
      return ops::kArgMaxKernel;
    case OpKind::Attention:
      return ops::kAttentionKernel;
    case OpKind::GeluQuick:
      return ops::kGeluQuickKernel;
    case OpKind::AvgPool2d:
      return ops::kAvgPool2dKernel;
    case OpKind::RmsNormMul:
      return ops::kRmsNormMulKernel;
    case OpKind::SetRows:
      return ops::kSetRowsKernel;
    case OpKind::GeluErf:
      return ops::kGeluErfKernel;
    case OpKind::Im2Col1d:
      return ops::kIm2Col1dKernel;
    case OpKind::Im2Col2d:
      return ops::kIm2Col2dKernel;
    case OpKind::GroupNorm:
      return ops::kGroupNormKernel;
    case OpKind::Upscale:
      return ops::kUpscaleKernel;
    case OpKind::Tanh:
      return ops::kTanhKernel;
    case OpKind::Relu:
      return ops::kReluKernel;
  }
  KILN_ASSERT(false, "kernel_of: unknown OpKind");
}

// Known type, positive sizes, whole quantized rows addressed block by block; anything else is a
// malformed view.
Status check_view(const OpCall& call, const TensorView& v, const char* what) {
  if (v.data == nullptr) return make_error("[", op_name(call.kind), "] ", what, " has no data");
  if (!dtype_info(static_cast<uint32_t>(v.type))) {
    return make_error("[", op_name(call.kind), "] ", what, " has unknown type id ",
                      static_cast<uint32_t>(v.type));
  }
  for (int i = 0; i < kMaxDims; ++i) {
    if (v.ne[i] < 1) {
      return make_error("[", op_name(call.kind), "] ", what, " size ne[", i, "] = ", v.ne[i],
                        " is not positive");
    }
  }
  if (v.ne[0] % block_size(v.type) != 0) {
    return make_error("[", op_name(call.kind), "] ", what, " row of ", v.ne[0], " ", dtype_name(v.type),
                      " values is not a multiple of the block size ", block_size(v.type));
  }
  if (info(v.type).quantized && v.nb[0] != type_size(v.type)) {
    return make_error("[", op_name(call.kind), "] ", what, " is ", dtype_name(v.type),
                      " with nb[0] = ", v.nb[0], ", not its block size ", type_size(v.type));
  }
  return ok_status();
}

}  // namespace

const char* op_name(OpKind k) {
  switch (k) {
    case OpKind::GetRows:
      return "get_rows";
    case OpKind::MulMat:
      return "mul_mat";
    case OpKind::Add:
      return "add";
    case OpKind::Mul:
      return "mul";
    case OpKind::Scale:
      return "scale";
    case OpKind::RmsNorm:
      return "rms_norm";
    case OpKind::LayerNorm:
      return "layer_norm";
    case OpKind::Rope:
      return "rope";
    case OpKind::SoftMax:
      return "soft_max";
    case OpKind::Silu:
      return "silu";
    case OpKind::Gelu:
      return "gelu";
    case OpKind::SwiGlu:
      return "swiglu";
    case OpKind::Cpy:
      return "cpy";
    case OpKind::Concat:
      return "concat";
    case OpKind::ArgMax:
      return "argmax";
    case OpKind::Attention:
      return "attention";
    case OpKind::GeluQuick:
      return "gelu_quick";
    case OpKind::AvgPool2d:
      return "avg_pool_2d";
    case OpKind::RmsNormMul:
      return "rms_norm_mul";
    case OpKind::SetRows:
      return "set_rows";
    case OpKind::GeluErf:
      return "gelu_erf";
    case OpKind::Im2Col1d:
      return "im2col_1d";
    case OpKind::Im2Col2d:
      return "im2col_2d";
    case OpKind::GroupNorm:
      return "group_norm";
    case OpKind::Upscale:
      return "upscale";
    case OpKind::Tanh:
      return "tanh";
    case OpKind::Relu:
      return "relu";
  }
  return "unknown";
}

Status check_kernel(const OpCall& call) {
  if (static_cast<unsigned>(call.kind) > static_cast<unsigned>(OpKind::Relu)) {
    return make_error("[op] unknown op kind ", static_cast<int>(call.kind));
  }
  if (call.n_src < 0 || call.n_src > 4) {
    return make_error("[", op_name(call.kind), "] n_src = ", call.n_src, " is outside [0, 4]");
  }
  KILN_TRY(check_view(call, call.dst, "dst"));
  static const char* const kNames[4] = {"src0", "src1", "src2", "src3"};
  for (int i = 0; i < call.n_src; ++i) KILN_TRY(check_view(call, call.src[i], kNames[i]));
  // Prepared layouts (ops/weight_prep.h) are read by mul_mat's weight kernels only.
  for (int i = -1; i < call.n_src; ++i) {
    const TensorView& v = i < 0 ? call.dst : call.src[i];
    if (v.layout != TensorLayout::Plain && !(call.kind == OpKind::MulMat && i == 0))
      return make_error("[", op_name(call.kind), "] ", i < 0 ? "dst" : kNames[i],
                        " is in a prepared weight layout, which only mul_mat's weights may be");
  }
  return kernel_of(call.kind).check(call);
}

bool kernel_supported(const OpCall& call) { return check_kernel(call).ok(); }

KernelPlan plan_kernel(const OpCall& call) {
  Status st = check_kernel(call);
  KILN_ASSERT(st.ok(), st.ok() ? std::string() : st.error().message);
  return kernel_of(call.kind).plan(call);
}

void run_kernel(const OpCall& call, int phase, int64_t begin, int64_t end, void* scratch) {
  KILN_ASSERT(begin <= end, "run_kernel: begin > end");
  if (begin == end) return;
  kernel_of(call.kind).run(call, phase, begin, end, scratch);
}

namespace ops {

bool same_shape(const TensorView& a, const TensorView& b) { return a.ne == b.ne; }

bool can_repeat(const TensorView& small, const TensorView& big) {
  for (int i = 0; i < kMaxDims; ++i) {
    if (big.ne[i] % small.ne[i] != 0) return false;
  }
  return true;
}

std::string describe(const TensorView& v) {
  std::string s(dtype_name(v.type));
  s += " [";
  for (int i = 0; i < kMaxDims; ++i) {
    if (i) s += ", ";
    s += std::to_string(v.ne[i]);
  }
  s += "]";
  return s;
}

Status check_arity(const OpCall& call, int min_src, int max_src) {
  if (call.n_src < min_src || call.n_src > max_src) {
    return make_error("[", op_name(call.kind), "] takes ", min_src, "..", max_src, " sources, got ",
                      call.n_src);
  }
  return ok_status();
}

Status check_type(const OpCall& call, const TensorView& v, DType t, const char* what) {
  if (v.type != t) {
    return make_error("[", op_name(call.kind), "] ", what, " is ", describe(v), ", expected type ",
                      dtype_name(t));
  }
  return ok_status();
}

}  // namespace ops
}  // namespace kiln
