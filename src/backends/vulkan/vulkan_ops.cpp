#include "backends/vulkan/vulkan_ops.h"

#include <algorithm>
#include <cctype>
#include <limits>

#include "ops/kernel.h"
#include "ops/rope_angles.h"
#include "ops/softmax_row.h"

namespace kiln {
namespace {

// Weight types with a deq32 function (shaders/dequant.glsl): mul_mat_<name> and get_rows_<name>.
constexpr DType kWeightTypes[] = {DType::F32,  DType::F16,  DType::BF16, DType::Q4_0, DType::Q4_1,
                                  DType::Q5_0, DType::Q5_1, DType::Q8_0, DType::Q2_K, DType::Q3_K,
                                  DType::Q4_K, DType::Q5_K, DType::Q6_K, DType::IQ4_NL, DType::IQ4_XS};
// K/V cache types of the attention shader (K and V of one type).
constexpr DType kKvTypes[] = {DType::F32, DType::F16, DType::Q8_0, DType::Q4_0};

constexpr int64_t kMaxHeadSize = 256;  // attention.comp's DMAX
// Matrix products of this many activation columns or more take mul_mat_tiled.comp (tiles of 64 x
// 64, another float order), fewer mul_mat.comp (a weight row against 8 columns at a time), as the
// CPU's prompt tiles and one-row kernels; OpParams::single_row_order keeps mul_mat.comp's order.
constexpr int64_t kTiledColumns = 32;

template <size_t N>
bool one_of(DType t, const DType (&set)[N]) {
  return std::find(std::begin(set), std::end(set), t) != std::end(set);
}
bool is_float(DType t) { return t == DType::F32 || t == DType::F16 || t == DType::BF16; }

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

Error unsupported(const OpCall& call, std::string_view what) {
  return make_error("[", op_name(call.kind), "] ", what, " (vulkan)");
}

// Sizes and strides must fit the shaders' 32-bit fields.
bool fits_u32(const TensorView& v) {
  constexpr uint64_t kMax = std::numeric_limits<uint32_t>::max();
  for (int i = 0; i < kMaxDims; ++i) {
    if (static_cast<uint64_t>(v.ne[i]) > kMax || v.nb[i] > kMax) return false;
  }
  return static_cast<uint64_t>(v.nelements()) <= kMax;
}

VkTensorDesc desc(const TensorView& v) {
  VkTensorDesc d;
  d.addr = reinterpret_cast<uintptr_t>(v.data);
  for (int i = 0; i < kMaxDims; ++i) {
    d.ne[i] = static_cast<uint32_t>(v.ne[i]);
    d.nb[i] = static_cast<uint32_t>(v.nb[i]);
  }
  d.type = static_cast<uint32_t>(v.type);
  return d;
}

uint64_t ceil_div(uint64_t a, uint64_t b) { return (a + b - 1) / b; }

void set_alibi(VkCallParams& p, float max_bias, int64_t n_head) {
  const ops::AlibiSlopes slopes(max_bias, static_cast<uint32_t>(n_head));
  p.f[1] = slopes.m0();
  p.f[2] = slopes.m1();
  p.i[0] = static_cast<int32_t>(slopes.n_head_log2());
  p.i[1] = slopes.enabled() ? 1 : 0;
}

}  // namespace

Status vk_check_op(const OpCall& call) {
  KILN_TRY(check_kernel(call));  // the shapes and types every backend requires (ops/op.h)
  for (int i = -1; i < call.n_src; ++i) {
    const TensorView& v = i < 0 ? call.dst : call.src[i];
    if (!fits_u32(v)) return unsupported(call, "a tensor of 2^32 elements or bytes or more: " + ops::describe(v));
    if (v.layout != TensorLayout::Plain) return unsupported(call, "a prepared CPU layout: " + ops::describe(v));
  }
  const TensorView& s0 = call.src[0];
  switch (call.kind) {
    case OpKind::GetRows:
    case OpKind::MulMat:
      if (!one_of(s0.type, kWeightTypes)) return unsupported(call, "weight type " + ops::describe(s0));
      if (s0.nb[0] != type_size(s0.type)) return unsupported(call, "weight rows that are not contiguous");
      return ok_status();
    case OpKind::Add:
    case OpKind::Mul:
    case OpKind::Scale:
    case OpKind::Silu:
    case OpKind::Gelu:
    case OpKind::GeluQuick:
    case OpKind::SwiGlu:
    case OpKind::RmsNorm:
    case OpKind::RmsNormMul:
    case OpKind::LayerNorm:
    case OpKind::Rope:
    case OpKind::SoftMax:
    case OpKind::ArgMax:
      return ok_status();
    case OpKind::Cpy:
      if (is_float(s0.type) && is_float(call.dst.type)) return ok_status();
      if (s0.type == DType::F32 && (call.dst.type == DType::Q8_0 || call.dst.type == DType::Q4_0)) return ok_status();
      return unsupported(call, "conversions other than between F32, F16 and BF16 and from F32 to Q8_0 and Q4_0: " +
                                   ops::describe(s0) + " -> " + ops::describe(call.dst));
    case OpKind::SetRows:
      if (!is_float(call.dst.type) && call.dst.type != DType::Q8_0 && call.dst.type != DType::Q4_0)
        return unsupported(call, "destination type " + ops::describe(call.dst));
      return ok_status();
    case OpKind::Attention: {
      const TensorView &k = call.src[1], &v = call.src[2];
      if (k.type != v.type || !one_of(k.type, kKvTypes))
        return unsupported(call, "K/V types other than one of F32, F16, Q8_0, Q4_0 for both: " + ops::describe(k) +
                                     ", " + ops::describe(v));
      if (s0.ne[0] > kMaxHeadSize || v.ne[0] > kMaxHeadSize)
        return unsupported(call, "head sizes above 256: " + ops::describe(s0));
      return ok_status();
    }
    case OpKind::Concat:
    case OpKind::AvgPool2d:
      return ok_status();
    case OpKind::GeluErf:
    case OpKind::Im2Col1d:
      // The audio encoder's ops (issue 36) have no shader yet: audio runs on the CPU only.
      return unsupported(call, "no shader for this op yet (the audio encoder runs on the CPU)");
    case OpKind::Im2Col2d:
    case OpKind::GroupNorm:
    case OpKind::Upscale:
    case OpKind::Tanh:
    case OpKind::Relu:
      // Stable Diffusion's ops (issue 34) have no shader yet: its networks run on the CPU only.
      return unsupported(call, "no shader for this op yet (Stable Diffusion's networks run on the CPU)");
  }
  return unsupported(call, "unknown op");
}

VkOpDispatch vk_plan_op(const OpCall& call, VkCallParams& p) {
  p = VkCallParams{};
  p.t[0] = desc(call.dst);
  for (int i = 0; i < call.n_src; ++i) p.t[1 + i] = desc(call.src[i]);
  const TensorView &d = call.dst, &s0 = call.src[0];
  const uint64_t n = static_cast<uint64_t>(d.nelements());
  const uint64_t rows = static_cast<uint64_t>(d.nrows());
  switch (call.kind) {
    case OpKind::GetRows:
      return {"get_rows_" + lower(dtype_name(s0.type)), ceil_div(ceil_div(d.ne[0], 32) * rows, 64)};
    case OpKind::MulMat: {
      if (d.ne[1] >= kTiledColumns && !call.params.single_row_order) {
        return {"mul_mat_tiled_" + lower(dtype_name(s0.type)),
                ceil_div(d.ne[0], 64) * ceil_div(d.ne[1], 64) * static_cast<uint64_t>(d.ne[2] * d.ne[3])};
      }
      // Threads per weight row: the power of two at or above the row's 32-value units, at most 64.
      const uint64_t units = ceil_div(s0.ne[0], 32);
      int log2_threads = 0;
      while (log2_threads < 6 && (uint64_t{1} << log2_threads) < units) ++log2_threads;
      p.i[0] = log2_threads;
      const uint64_t rows_per_group = 64 >> log2_threads;
      return {"mul_mat_" + lower(dtype_name(s0.type)),
              ceil_div(d.ne[0], rows_per_group) * ceil_div(d.ne[1], 8) * static_cast<uint64_t>(d.ne[2] * d.ne[3])};
    }
    case OpKind::Add: return {"add", ceil_div(n, 256)};
    case OpKind::Mul: return {"mul", ceil_div(n, 256)};
    case OpKind::Scale:
      p.f[0] = call.params.scale;
      return {"scale", ceil_div(n, 256)};
    case OpKind::Silu: return {"silu", ceil_div(n, 256)};
    case OpKind::Gelu: return {"gelu", ceil_div(n, 256)};
    case OpKind::GeluQuick: return {"gelu_quick", ceil_div(n, 256)};
    case OpKind::SwiGlu: return {"swiglu", ceil_div(n, 256)};
    case OpKind::RmsNorm:
    case OpKind::RmsNormMul:
    case OpKind::LayerNorm:
      p.f[0] = call.params.eps;
      return {call.kind == OpKind::RmsNorm ? "rms_norm" : call.kind == OpKind::RmsNormMul ? "rms_norm_mul" : "layer_norm",
              rows};
    case OpKind::Rope: {
      const RopeParams& rp = call.params.rope;
      const ops::RopeAngles a = ops::rope_angles(rp);
      p.f[0] = rp.freq_scale;
      p.f[1] = rp.ext_factor;
      p.f[2] = rp.attn_factor;
      p.f[3] = a.corr_dims[0];
      p.f[4] = a.corr_dims[1];
      p.f[5] = a.theta_scale;
      p.i[0] = rp.n_dims;
      p.i[1] = rp.mode == RopeMode::Neox ? 1 : 0;
      p.i[2] = call.n_src == 3 ? 1 : 0;
      return {"rope", ceil_div(n / 2, 256)};
    }
    case OpKind::SoftMax:
      p.f[0] = call.params.scale;
      set_alibi(p, call.params.max_bias, s0.ne[2]);
      p.i[2] = call.n_src == 2 ? 1 : 0;
      return {"soft_max", rows};
    case OpKind::ArgMax: return {"argmax", static_cast<uint64_t>(s0.nrows())};
    case OpKind::Cpy:
      if (info(d.type).quantized) {  // F32 rows into blocks: set_rows.comp with row i to row i
        return {"cpy_" + lower(dtype_name(d.type)),
                ceil_div(ceil_div(s0.ne[0], 32) * static_cast<uint64_t>(s0.nrows()), 64)};
      }
      return {"cpy", ceil_div(n, 256)};
    case OpKind::SetRows: {
      const std::string shader = d.type == DType::Q8_0   ? "set_rows_q8_0"
                                 : d.type == DType::Q4_0 ? "set_rows_q4_0"
                                                         : "set_rows_float";
      return {shader, ceil_div(ceil_div(s0.ne[0], 32) * static_cast<uint64_t>(s0.nrows()), 64)};
    }
    case OpKind::Attention:
      p.f[0] = call.params.scale;
      set_alibi(p, call.params.max_bias, s0.ne[2]);
      p.i[2] = call.n_src == 4 ? 1 : 0;
      p.i[3] = call.params.causal ? 1 : 0;
      p.i[4] = call.params.q_pos0;
      return {"attention_" + lower(dtype_name(call.src[1].type)),
              static_cast<uint64_t>(s0.ne[1] * s0.ne[2] * s0.ne[3])};
    case OpKind::Concat:
      p.i[0] = call.params.axis;
      return {"concat", ceil_div(n, 256)};
    case OpKind::AvgPool2d:
      p.i[0] = call.params.pool;
      return {"avg_pool", ceil_div(n, 256)};
    case OpKind::GeluErf:
    case OpKind::Im2Col1d:
    case OpKind::Im2Col2d:
    case OpKind::GroupNorm:
    case OpKind::Upscale:
    case OpKind::Tanh:
    case OpKind::Relu:
      break;  // refused by vk_check_op
  }
  KILN_ASSERT(false, "vk_plan_op: an unknown op");
  return {};
}

}  // namespace kiln
