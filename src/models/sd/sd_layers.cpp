#include "models/sd/sd_layers.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

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

namespace {

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Output rows [r0, r1) of the convolution of x [c_in, w, h, b] (b = 1 unless r0 = 0 and r1 is
// every row) by `kernel` [K, c_out]: [c_out, w', r1 - r0, b], before the bias. A strip reads the
// input rows its windows cover, from ceil(padding / stride) earlier output rows on (or from row 0)
// so that the im2col's zero padding on top of them only enters columns it drops; its bottom padding
// is zeros only below x's last row, else it enters rows after r1 (dropped too).
Tensor conv_rows(Graph& g, Tensor kernel, Tensor x, const Conv2dParams& p, int64_t r0, int64_t r1,
                 const std::string& name) {
  const TensorView xv = g.tensor(x).view;  // a copy: adding tensors moves the graph's
  const int64_t K = g.tensor(kernel).view.ne[0], c_out = g.tensor(kernel).view.ne[1];
  const int64_t ow = p.out_size(0, xv.ne[1]), oh = p.out_size(1, xv.ne[2]), n = r1 - r0;
  const bool whole = r0 == 0 && r1 == oh;
  const bool direct = p.kernel[0] == 1 && p.kernel[1] == 1 && p.stride[0] == 1 && p.stride[1] == 1 &&
                      p.padding[0] == 0 && p.padding[1] == 0;
  // Rows dropped on top; fewer only where the strip then reads from x's row 0 (real padding).
  const int64_t lead = std::min(r0, ceil_div(p.padding[1], p.stride[1]));
  const int64_t in0 = (r0 - lead) * p.stride[1];
  const int64_t in1 = std::min(xv.ne[2], (r1 - 1) * p.stride[1] - p.padding[1] +
                                             (p.kernel[1] - 1) * p.dilation[1] + 1);
  const Tensor rows = whole ? x
                            : g.view(x, {xv.ne[0], xv.ne[1], in1 - in0, xv.ne[3]}, xv.nb,
                                     static_cast<size_t>(in0) * xv.nb[2], name + ".rows");
  if (direct) return g.mul_mat(kernel, rows, name);
  const Tensor cols = g.im2col_2d(rows, p, name + ".im2col");  // [K, w', lead + n + ..., b]
  if (!cols.valid()) return Tensor{};  // the graph holds the error (an x that is no grid, ...)
  const Shape cn = g.tensor(cols).view.ne;
  const size_t row_bytes = static_cast<size_t>(K) * sizeof(float);
  const Tensor used = whole ? g.reshape(cols, {K, cn[1] * cn[2] * cn[3], 1, 1})
                            : g.view(cols, {K, ow * n, 1, 1}, {sizeof(float), row_bytes, row_bytes * ow * n,
                                                               row_bytes * ow * n},
                                     static_cast<size_t>(lead * ow) * row_bytes, name + ".cols");
  return g.reshape(g.mul_mat(kernel, used, name), {c_out, ow, whole ? cn[2] : n, whole ? cn[3] : 1});
}

// How many strips of output rows the convolution's product takes: one unless its columns exceed
// max_column_bytes (and x is one item); each strip keeps at least two columns, so that every
// product has tinyBLAS's order (ops/gemm/gemm.h: the prompt order for two rows or more) and
// strips give the bits of the whole product.
int64_t conv_strips(int64_t K, int64_t ow, int64_t oh, int64_t items, int64_t max_column_bytes) {
  if (items != 1 || ow < 1 || oh < 1) return 1;
  const int64_t bytes = K * ow * oh * static_cast<int64_t>(sizeof(float));
  const int64_t min_rows = ow >= 2 ? 1 : 2;
  return std::clamp<int64_t>(ceil_div(bytes, std::max<int64_t>(max_column_bytes, 1)), 1,
                             std::max<int64_t>(oh / min_rows, 1));
}

}  // namespace

Tensor conv2d(Graph& g, const Conv2d& c, Tensor x, const std::string& name, int64_t max_column_bytes) {
  const Shape wn = c.w.view.ne;  // [k, k, c_in, c_out]
  const int64_t K = wn[0] * wn[1] * wn[2], c_out = wn[3];
  // ref: Conv2d::init_params: stable-diffusion.cpp holds every conv weight in F16, whatever the
  // file's type (it converts at load), so its im2col rounds the columns to F16 too. (A file never
  // holds a quantized kernel: its rows, the kernel's width, are not whole blocks.)
  Tensor kernel = g.reshape(weight_tensor(g, c.w), {K, c_out, 1, 1});
  if (c.w.view.type != DType::F16) kernel = g.cast(kernel, DType::F16, name + ".w_f16");
  Conv2dParams p;
  p.kernel[0] = p.kernel[1] = c.k;
  p.stride[0] = p.stride[1] = c.stride;
  p.padding[0] = p.padding[1] = c.padding;
  if (!x.valid() || !kernel.valid()) return Tensor{};
  const Shape xn = g.tensor(x).view.ne;
  const int64_t ow = p.out_size(0, xn[1]), oh = p.out_size(1, xn[2]);
  const int64_t strips = conv_strips(K, ow, oh, xn[3], max_column_bytes);
  std::vector<Tensor> parts;
  for (int64_t s = 0; s < strips; ++s) {
    const std::string part = strips == 1 ? name : name + ".strip" + std::to_string(s);
    parts.push_back(conv_rows(g, kernel, x, p, oh * s / strips, oh * (s + 1) / strips, part));
  }
  // The strips joined pairwise (each output row copied log2(strips) times, not strips / 2).
  while (parts.size() > 1) {
    std::vector<Tensor> joined;
    for (size_t i = 0; i + 1 < parts.size(); i += 2) joined.push_back(g.concat(parts[i], parts[i + 1], 2));
    if (parts.size() % 2 == 1) joined.push_back(parts.back());
    parts = std::move(joined);
  }
  const Tensor y = parts.front();
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
