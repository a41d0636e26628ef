// Element-wise F32 kernels: add, mul (with ggml's broadcasting), scale, silu, gelu, gelu_quick, gelu_erf,
// tanh, relu, swiglu (silu in the arithmetic of ggml's AVX-512 build, quant/silu_rows.h).
// One work unit is one row of dst; any strides, including non-contiguous dim 0.
#include <cmath>
#include <cstdint>

#include "ops/activations.h"
#include "ops/kernel.h"
#include "ops/quant/silu_rows.h"

namespace kiln::ops {
namespace {

KernelPlan row_plan(const OpCall& call) {
  KernelPlan p;
  p.units[0] = call.dst.nrows();
  return p;
}

Status check_unary(const OpCall& call) {
  KILN_TRY(check_arity(call, 1, 1));
  KILN_TRY(check_type(call, call.src[0], DType::F32, "src0"));
  KILN_TRY(check_type(call, call.dst, DType::F32, "dst"));
  if (!same_shape(call.src[0], call.dst)) {
    return make_error("[", op_name(call.kind), "] src0 ", describe(call.src[0]), " and dst ",
                      describe(call.dst), " differ in shape");
  }
  return ok_status();
}

bool contiguous_rows(const TensorView& t) { return t.nb[0] == sizeof(float); }

// dst = src0 through a row kernel: row(n, y, x) over contiguous rows (plain arrays), else
// each(i0, n, x) per element.
template <class Row, class Each>
void run_unary_rows(const OpCall& call, int64_t begin, int64_t end, Row row, Each each) {
  const TensorView& s = call.src[0];
  const TensorView& d = call.dst;
  const int64_t n = d.ne[0];
  const bool flat = contiguous_rows(s) && contiguous_rows(d);
  for (int64_t r = begin; r < end; ++r) {
    const RowIdx ri = row_idx(d, r);
    char* srow = row_ptr(s, ri);
    char* drow = row_ptr(d, ri);
    if (flat) {
      row(n, reinterpret_cast<float*>(drow), reinterpret_cast<const float*>(srow));
      continue;
    }
    for (int64_t i0 = 0; i0 < n; ++i0) elem<float>(d, drow, i0) = each(i0, n, elem<float>(s, srow, i0));
  }
}

// dst = f(src0) per element (contiguous rows as plain arrays, which the compiler vectorises).
template <class F>
void run_unary(const OpCall& call, int64_t begin, int64_t end, F f) {
  run_unary_rows(
      call, begin, end,
      [f](int64_t n, float* y, const float* x) {
        for (int64_t i = 0; i < n; ++i) y[i] = f(x[i]);
      },
      [f](int64_t, int64_t, float x) { return f(x); });
}

}  // namespace

// ref: ggml_compute_forward_add/mul (ggml-cpu/binary-ops.cpp): src1 repeats over src0 along
// every dimension (ggml_can_repeat), dst has src0's shape (kernel.h).
Status check_binary_broadcast(const OpCall& call) {
  KILN_TRY(check_arity(call, 2, 2));
  KILN_TRY(check_type(call, call.src[0], DType::F32, "src0"));
  KILN_TRY(check_type(call, call.src[1], DType::F32, "src1"));
  KILN_TRY(check_type(call, call.dst, DType::F32, "dst"));
  if (!same_shape(call.src[0], call.dst)) {
    return make_error("[", op_name(call.kind), "] src0 ", describe(call.src[0]), " and dst ",
                      describe(call.dst), " differ in shape");
  }
  if (!can_repeat(call.src[1], call.src[0])) {
    return make_error("[", op_name(call.kind), "] src1 ", describe(call.src[1]),
                      " does not repeat over src0 ", describe(call.src[0]));
  }
  return ok_status();
}

namespace {

// dst = src0 (op) src1 through a row kernel: row(n, z, x, y) where the three rows are contiguous
// and src1's is whole, else each(i0, n, x, y) per element (src1 repeating as ggml broadcasts).
template <class Row, class Each>
void run_binary_rows(const OpCall& call, int64_t begin, int64_t end, Row row, Each each) {
  const TensorView& a = call.src[0];
  const TensorView& b = call.src[1];
  const TensorView& d = call.dst;
  const int64_t n = d.ne[0], nb0 = b.ne[0];
  const bool flat = contiguous_rows(a) && contiguous_rows(b) && contiguous_rows(d) && nb0 == n;
  for (int64_t r = begin; r < end; ++r) {
    const RowIdx ri = row_idx(d, r);
    char* arow = row_ptr(a, ri);
    char* brow = row_ptr(b, ri.i1 % b.ne[1], ri.i2 % b.ne[2], ri.i3 % b.ne[3]);
    char* drow = row_ptr(d, ri);
    if (flat) {
      row(n, reinterpret_cast<float*>(drow), reinterpret_cast<const float*>(arow),
          reinterpret_cast<const float*>(brow));
      continue;
    }
    for (int64_t i0 = 0; i0 < n; ++i0)
      elem<float>(d, drow, i0) = each(i0, n, elem<float>(a, arow, i0), elem<float>(b, brow, i0 % nb0));
  }
}

template <class F>
void run_binary_broadcast(const OpCall& call, int64_t begin, int64_t end, F f) {
  run_binary_rows(
      call, begin, end,
      [f](int64_t n, float* z, const float* x, const float* y) {
        for (int64_t i = 0; i < n; ++i) z[i] = f(x[i], y[i]);
      },
      [f](int64_t, int64_t, float x, float y) { return f(x, y); });
}

void run_add(const OpCall& call, int, int64_t begin, int64_t end, void*) {
  run_binary_broadcast(call, begin, end, [](float x, float y) { return x + y; });
}
void run_mul(const OpCall& call, int, int64_t begin, int64_t end, void*) {
  run_binary_broadcast(call, begin, end, [](float x, float y) { return x * y; });
}

void run_scale(const OpCall& call, int, int64_t begin, int64_t end, void*) {
  const float s = call.params.scale;  // ref: ggml_vec_scale_f32
  run_unary(call, begin, end, [s](float x) { return x * s; });
}

// ref: ggml_vec_silu_f32 (quant/silu_rows.h: ggml_v_silu's arithmetic, then libm's for the last
// ne0 % 16 values of each row).
void run_silu(const OpCall& call, int, int64_t begin, int64_t end, void*) {
  run_unary_rows(call, begin, end, quant::silu_row_ggml, quant::silu_ggml_at);
}

void run_gelu(const OpCall& call, int, int64_t begin, int64_t end, void*) {
  run_unary_rows(call, begin, end, gelu_row, [](int64_t, int64_t, float x) { return gelu_f32(x); });
}

void run_gelu_quick(const OpCall& call, int, int64_t begin, int64_t end, void*) {
  run_unary_rows(call, begin, end, gelu_quick_row,
                 [](int64_t, int64_t, float x) { return gelu_quick_f32(x); });
}

void run_gelu_erf(const OpCall& call, int, int64_t begin, int64_t end, void*) {
  run_unary(call, begin, end, gelu_erf_f32);
}

// ref: ggml_vec_tanh_f32 and ggml_vec_relu_f32.
void run_tanh(const OpCall& call, int, int64_t begin, int64_t end, void*) {
  run_unary(call, begin, end, [](float x) { return std::tanh(x); });
}
void run_relu(const OpCall& call, int, int64_t begin, int64_t end, void*) {
  run_unary(call, begin, end, [](float x) { return x > 0.0f ? x : 0.0f; });
}

Status check_swiglu(const OpCall& call) {
  KILN_TRY(check_arity(call, 2, 2));
  for (int i = 0; i < 2; ++i) KILN_TRY(check_type(call, call.src[i], DType::F32, i ? "src1" : "src0"));
  KILN_TRY(check_type(call, call.dst, DType::F32, "dst"));
  if (!same_shape(call.src[0], call.dst) || !same_shape(call.src[1], call.dst)) {
    return make_error("[swiglu] src0 ", describe(call.src[0]), ", src1 ", describe(call.src[1]), " and dst ",
                      describe(call.dst), " must have one shape");
  }
  return ok_status();
}

// ref: ggml_vec_swiglu_f32: silu(x) * g, silu as run_silu's.
void run_swiglu(const OpCall& call, int, int64_t begin, int64_t end, void*) {
  run_binary_rows(call, begin, end, quant::swiglu_row_ggml,
                  [](int64_t i0, int64_t n, float x, float g) { return quant::silu_ggml_at(i0, n, x) * g; });
}

}  // namespace

const KernelFns kAddKernel{check_binary_broadcast, row_plan, run_add};
const KernelFns kMulKernel{check_binary_broadcast, row_plan, run_mul};
const KernelFns kScaleKernel{check_unary, row_plan, run_scale};
const KernelFns kSiluKernel{check_unary, row_plan, run_silu};
const KernelFns kGeluKernel{check_unary, row_plan, run_gelu};
const KernelFns kGeluQuickKernel{check_unary, row_plan, run_gelu_quick};
const KernelFns kGeluErfKernel{check_unary, row_plan, run_gelu_erf};
const KernelFns kSwiGluKernel{check_swiglu, row_plan, run_swiglu};
const KernelFns kTanhKernel{check_unary, row_plan, run_tanh};
const KernelFns kReluKernel{check_unary, row_plan, run_relu};

}  // namespace kiln::ops
