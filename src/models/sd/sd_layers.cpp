#include "models/sd/sd_layers.h"

#include <cmath>

#include "models/clip/vit.h"

namespace kiln::sd {

Result<Conv2d> bind_conv2d(const WeightBinder& b, const std::string& name, int64_t c_in, int64_t c_out,
                           int32_t k, int32_t stride, int32_t padding) {
  Conv2d c;
  KILN_ASSIGN_OR_RETURN(c.w, b.required(name + ".weight", {k, k, c_in, c_out}));
  KILN_ASSIGN_OR_RETURN(c.b, b.optional(name + ".bias", {c_out}));
  c.k = k;
  c.stride = stride;
  c.padding = padding < 0 ? k / 2 : padding;
  return c;
}

Result<Norm> bind_norm(const WeightBinder& b, const std::string& name, int64_t c) {
  Norm n;
  KILN_ASSIGN_OR_RETURN(n.w, b.required(name + ".weight", {c}));
  KILN_ASSIGN_OR_RETURN(n.b, b.required(name + ".bias", {c}));
  return n;
}

Result<Linear> bind_linear(const WeightBinder& b, const std::string& name, int64_t n_in, int64_t n_out,
                           bool bias) {
  Linear l;
  KILN_ASSIGN_OR_RETURN(l.w, b.required(name + ".weight", {n_in, n_out}));
  if (bias) {
    KILN_ASSIGN_OR_RETURN(l.b, b.required(name + ".bias", {n_out}));
  }
  return l;
}

Tensor conv2d(Graph& g, const Conv2d& c, Tensor x, const std::string& name) {
  const Shape wn = c.w.view.ne;  // [k, k, c_in, c_out]
  const int64_t K = wn[0] * wn[1] * wn[2], c_out = wn[3];
  // ref: Conv2d::init_params: stable-diffusion.cpp holds every conv weight in F16, whatever the
  // file's type (it converts at load), so its im2col rounds the columns to F16 too. (A file never
  // holds a quantized kernel: its rows, the kernel's width, are not whole blocks.)
  Tensor kernel = g.reshape(weight_tensor(g, c.w), {K, c_out, 1, 1});
  if (c.w.view.type != DType::F16) kernel = g.cast(kernel, DType::F16, name + ".w_f16");
  Tensor y;
  if (c.k == 1 && c.stride == 1 && c.padding == 0) {
    y = g.mul_mat(kernel, x, name);
  } else {
    Conv2dParams p;
    p.kernel[0] = p.kernel[1] = c.k;
    p.stride[0] = p.stride[1] = c.stride;
    p.padding[0] = p.padding[1] = c.padding;
    const Tensor cols = g.im2col_2d(x, p, name + ".im2col");  // [K, w', h', b]
    if (!cols.valid()) return Tensor{};  // the graph holds the error (an x that is no grid, ...)
    const Shape cn = g.tensor(cols).view.ne;
    y = g.reshape(g.mul_mat(kernel, g.reshape(cols, {K, cn[1] * cn[2] * cn[3], 1, 1}), name),
                  {c_out, cn[1], cn[2], cn[3]});
  }
  return c.b ? g.add(y, f32_weight_tensor(g, c.b, name + ".b"), name + "+b") : y;
}

Tensor group_norm32(Graph& g, const Norm& n, Tensor x, const std::string& name) {
  // ref: ggml_ext_group_norm: ggml_group_norm(x, 32, 1e-6), then * w, then + b.
  Tensor y = g.group_norm(x, 32, 1e-6f, name);
  y = g.mul(y, f32_weight_tensor(g, n.w, name + ".w"), name + "*w");
  return g.add(y, f32_weight_tensor(g, n.b, name + ".b"), name + "+b");
}

Tensor layer_norm(Graph& g, const Norm& n, Tensor x, const std::string& name) {
  return vit_norm(g, x, n.w, n.b, 1e-5f, name);
}

Tensor linear(Graph& g, const Linear& l, Tensor x, const std::string& name) {
  return vit_linear(g, l.w, l.b, x, name);
}

Tensor multi_head_attention(Graph& g, Tensor q, Tensor k, Tensor v, int64_t n_head, const std::string& name) {
  const Shape qn = g.tensor(q).view.ne, kn = g.tensor(k).view.ne;
  const int64_t c = qn[0], hd = c / n_head;
  const auto heads = [&](Tensor t, const Shape& tn) {  // [hd, n, heads, b]
    return g.permute(g.reshape(t, {hd, n_head, tn[1], tn[2]}), {0, 2, 1, 3});
  };
  OpParams p;
  p.scale = 1.0f / std::sqrt(static_cast<float>(hd));
  p.causal = false;
  p.attn_path = AttentionPath::Plain;
  Tensor o = g.attention(heads(q, qn), heads(k, kn), heads(v, kn), Tensor{}, p, name + ".attn");
  o = g.cast(g.permute(o, {0, 2, 1, 3}), DType::F32, name + ".merge");  // [hd, heads, n_q, b]
  return g.reshape(o, {c, qn[1], qn[2], 1});
}

}  // namespace kiln::sd
