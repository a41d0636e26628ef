#include "models/clip/vit.h"

#include <cmath>
#include <string>

#include "models/weight_binder.h"

namespace kiln {
Result<std::vector<VitLayer>> bind_vit_layers(const GgufFile& file, const std::string& prefix, int64_t n_layer,
                                              int64_t D, int64_t F, int64_t q_width, int64_t kv_width) {
  const WeightBinder b(file, "mmproj");
  auto blk = [&](int64_t il, const std::string& name) { return prefix + ".blk." + std::to_string(il) + "." + name; };
  std::vector<VitLayer> layers(static_cast<size_t>(n_layer));
  for (int64_t il = 0; il < n_layer; ++il) {
    for (const char* other : {"attn_qkv.weight", "attn_q_norm.weight", "attn_k_norm.weight", "ffn_gate.weight",
                              "ffn_gate_exps.weight", "ls1.weight", "ls2.weight", "attn_post_norm.weight",
                              "ffn_post_norm.weight", "out_scale.weight"}) {
      if (file.find_tensor(blk(il, other)) != nullptr)
        return make_error("mmproj: tensor '", blk(il, other), "' belongs to a ViT variant kiln does not support");
    }
    VitLayer& l = layers[static_cast<size_t>(il)];
    KILN_ASSIGN_OR_RETURN(l.ln1_w, b.required(blk(il, "ln1.weight"), {D}));
    KILN_ASSIGN_OR_RETURN(l.ln1_b, b.optional(blk(il, "ln1.bias"), {D}));
    KILN_ASSIGN_OR_RETURN(l.q_w, b.required(blk(il, "attn_q.weight"), {D, q_width}));
    KILN_ASSIGN_OR_RETURN(l.k_w, b.required(blk(il, "attn_k.weight"), {D, kv_width}));
    KILN_ASSIGN_OR_RETURN(l.v_w, b.required(blk(il, "attn_v.weight"), {D, kv_width}));
    KILN_ASSIGN_OR_RETURN(l.o_w, b.required(blk(il, "attn_out.weight"), {q_width, D}));
    KILN_ASSIGN_OR_RETURN(l.q_b, b.optional(blk(il, "attn_q.bias"), {q_width}));
    KILN_ASSIGN_OR_RETURN(l.k_b, b.optional(blk(il, "attn_k.bias"), {kv_width}));
    KILN_ASSIGN_OR_RETURN(l.v_b, b.optional(blk(il, "attn_v.bias"), {kv_width}));
    KILN_ASSIGN_OR_RETURN(l.o_b, b.optional(blk(il, "attn_out.bias"), {D}));
    KILN_ASSIGN_OR_RETURN(l.ln2_w, b.required(blk(il, "ln2.weight"), {D}));
    KILN_ASSIGN_OR_RETURN(l.ln2_b, b.optional(blk(il, "ln2.bias"), {D}));
    // ref: clip.cpp's is_ffn_swapped: legacy converters wrote ffn_up and ffn_down swapped, which
    // shows as an "ffn_down" whose input width is n_embd.
    const GgufTensorInfo* down = file.find_tensor(blk(il, "ffn_down.weight"));
    const bool swapped = down != nullptr && down->ne[0] == D && F != D;
    const std::string up_name = swapped ? "ffn_down" : "ffn_up";
    const std::string down_name = swapped ? "ffn_up" : "ffn_down";
    KILN_ASSIGN_OR_RETURN(l.up_w, b.required(blk(il, up_name + ".weight"), {D, F}));
    KILN_ASSIGN_OR_RETURN(l.up_b, b.optional(blk(il, up_name + ".bias"), {F}));
    KILN_ASSIGN_OR_RETURN(l.down_w, b.required(blk(il, down_name + ".weight"), {F, D}));
    KILN_ASSIGN_OR_RETURN(l.down_b, b.optional(blk(il, down_name + ".bias"), {D}));
  }
  return layers;
}

Result<VitWeights> bind_vit_weights(const GgufFile& file, const ClipHParams& hp) {
  const WeightBinder b(file, "mmproj");
  const int64_t D = hp.n_embd, F = hp.n_ff, P = hp.patch_size;
  const int64_t q_width = hp.n_head * hp.head_dim, kv_width = hp.n_head_kv * hp.head_dim;
  VitWeights w;
  KILN_ASSIGN_OR_RETURN(w.patch_embd, b.required("v.patch_embd.weight", {P, P, 3, D}));
  KILN_ASSIGN_OR_RETURN(w.patch_bias, b.optional("v.patch_embd.bias", {D}));
  KILN_ASSIGN_OR_RETURN(w.class_embd, b.optional("v.class_embd", {D}));
  const int64_t n_patches = hp.patches_per_side() * hp.patches_per_side();
  KILN_ASSIGN_OR_RETURN(w.pos_embd, b.required("v.position_embd.weight", {D, n_patches + (w.class_embd ? 1 : 0)}));
  KILN_ASSIGN_OR_RETURN(w.pre_ln_w, b.optional("v.pre_ln.weight", {D}));
  KILN_ASSIGN_OR_RETURN(w.pre_ln_b, b.optional("v.pre_ln.bias", {D}));
  KILN_ASSIGN_OR_RETURN(w.post_ln_w, b.optional("v.post_ln.weight", {D}));
  KILN_ASSIGN_OR_RETURN(w.post_ln_b, b.optional("v.post_ln.bias", {D}));
  for (const char* name : {"v.patch_embd.weight.1", "v.norm_embd.weight"}) {
    if (file.find_tensor(name) != nullptr)
      return make_error("mmproj: tensor '", name, "' belongs to a vision encoder kiln does not support");
  }
  KILN_ASSIGN_OR_RETURN(w.layers, bind_vit_layers(file, "v", hp.n_layer, D, F, q_width, kv_width));
  return w;
}

void image_to_patches(const RgbImage& img, const ClipHParams& hp, std::span<float> out) {
  const int64_t P = hp.patch_size, n_side = hp.patches_per_side();
  const int64_t K = 3 * P * P;
  KILN_ASSERT(img.width == hp.image_size && img.height == hp.image_size, "image_to_patches: image of the wrong size");
  KILN_ASSERT(static_cast<int64_t>(out.size()) == n_side * n_side * K, "image_to_patches: output of the wrong size");
  for (int64_t py = 0; py < n_side; ++py) {
    for (int64_t px = 0; px < n_side; ++px) {
      float* patch = out.data() + (py * n_side + px) * K;
      for (int64_t c = 0; c < 3; ++c) {
        for (int64_t ky = 0; ky < P; ++ky) {
          for (int64_t kx = 0; kx < P; ++kx) {
            const uint8_t v = img.pixel(static_cast<int32_t>(px * P + kx), static_cast<int32_t>(py * P + ky))[c];
            // ref: clip_image_f32::from_u8 then normalize.
            const float f = static_cast<float>(v) / 255.0f;
            patch[(c * P + ky) * P + kx] = (f - hp.image_mean[static_cast<size_t>(c)]) / hp.image_std[static_cast<size_t>(c)];
          }
        }
      }
    }
  }
}

Tensor weight_tensor(Graph& g, const Weight& w) { return w ? g.external(w.info->name, w.view) : Tensor{}; }

Tensor f32_weight_tensor(Graph& g, const Weight& w, const std::string& name) {
  const Tensor t = weight_tensor(g, w);
  return w && w.view.type != DType::F32 ? g.cast(t, DType::F32, name + ".f32") : t;
}

Tensor vit_linear(Graph& g, const Weight& w, const Weight& b, Tensor x, const std::string& name) {
  const Tensor y = g.mul_mat(weight_tensor(g, w), x, name);
  return b ? g.add(y, f32_weight_tensor(g, b, name + ".b"), name + "+b") : y;
}

Tensor vit_norm(Graph& g, Tensor x, const Weight& w, const Weight& b, float eps, const std::string& name) {
  Tensor y = g.layer_norm(x, eps, name);
  if (w) y = g.mul(y, f32_weight_tensor(g, w, name + ".w"), name + "*w");
  if (b) y = g.add(y, f32_weight_tensor(g, b, name + ".b"), name + "+b");
  return y;
}

Tensor vit_patch_embeddings(Graph& g, const ClipHParams& hp, const VitWeights& w, Tensor patches) {
  // ref: ggml_conv_2d: im2col writes the pixels as F16 and mul_mat converts the kernel to F16, so
  // every product is of two F16 values. The kernel goes first here (its rows are the output
  // channels), which gives [n_embd, n_patches] directly; each dot product is the same.
  const int64_t K = 3 * hp.patch_size * hp.patch_size;
  Tensor kernel = g.reshape(weight_tensor(g, w.patch_embd), {K, hp.n_embd, 1, 1});
  if (w.patch_embd.view.type != DType::F16) kernel = g.cast(kernel, DType::F16, "patch_kernel_f16");
  Tensor x = g.mul_mat(kernel, patches, "patch_embd");
  if (w.patch_bias) x = g.add(x, weight_tensor(g, w.patch_bias), "patch_bias");
  return x;
}

VitDims vit_dims(const ClipHParams& hp) { return {hp.head_dim, hp.n_head, hp.n_head_kv, hp.eps, hp.ffn_act, false}; }

Tensor vit_ffn(Graph& g, const Weight& up_w, const Weight& up_b, const Weight& down_w, const Weight& down_b,
               ClipFfnAct act, Tensor x, const std::string& name) {
  Tensor cur = vit_linear(g, up_w, up_b, x, name + "_up");
  switch (act) {
    case ClipFfnAct::Gelu:
      cur = g.gelu(cur, name + "_gelu");
      break;
    case ClipFfnAct::GeluQuick:
      cur = g.gelu_quick(cur, name + "_gelu_quick");
      break;
    case ClipFfnAct::Silu:
      cur = g.silu(cur, name + "_silu");
      break;
    case ClipFfnAct::GeluErf:
      cur = g.gelu_erf(cur, name + "_gelu_erf");
      break;
  }
  return vit_linear(g, down_w, down_b, cur, name + "_down");
}

Tensor vit_blocks(Graph& g, const VitDims& hp, std::span<const VitLayer> layers, Tensor x, int64_t n_layers,
                  AttentionPath attention) {
  const int64_t hd = hp.head_dim, H = hp.n_head, Hkv = hp.n_head_kv;
  const int64_t T = g.tensor(x).view.ne[1];
  OpParams attn;
  attn.scale = 1.0f / std::sqrt(static_cast<float>(hd));
  attn.causal = hp.causal;
  attn.attn_path = attention;
  for (int64_t il = 0; il < n_layers; ++il) {
    const VitLayer& l = layers[static_cast<size_t>(il)];
    const std::string p = "v" + std::to_string(il) + ".";
    Tensor cur = vit_norm(g, x, l.ln1_w, l.ln1_b, hp.eps, p + "ln1");
    Tensor q, k, v;
    if (l.qkv_w) {
      // One product for the three, then each a view of its rows. ref: MultiheadAttention's
      // in_proj and split_qkv (stable-diffusion.cpp).
      const Tensor qkv = vit_linear(g, l.qkv_w, l.qkv_b, cur, p + "qkv");  // [(H + 2 Hkv) hd, T]
      const TensorView qv = g.tensor(qkv).view;  // a copy: adding the views below moves the graph's tensors
      const auto part = [&](int64_t heads, int64_t first_head, const char* what) {
        const Tensor rows = g.view(qkv, {hd, heads, T, 1}, {qv.nb[0], hd * qv.nb[0], qv.nb[1], qv.nb[1] * T},
                                   static_cast<size_t>(first_head * hd) * qv.nb[0], p + what);
        return g.cast(rows, DType::F32, p + what + "_cont");  // contiguous, as the separate products
      };
      q = part(H, 0, "q");
      k = part(Hkv, H, "k");
      v = part(Hkv, H + Hkv, "v");
    } else {
      q = g.reshape(vit_linear(g, l.q_w, l.q_b, cur, p + "q"), {hd, H, T, 1});
      k = g.reshape(vit_linear(g, l.k_w, l.k_b, cur, p + "k"), {hd, Hkv, T, 1});
      v = g.reshape(vit_linear(g, l.v_w, l.v_b, cur, p + "v"), {hd, Hkv, T, 1});
    }
    // Heads outermost: [hd, T, heads]. ref: build_attn: with flash attention K and V are cast to
    // F16; without, kq = k.q, softmax, then v times the probabilities, all F32.
    q = g.permute(q, {0, 2, 1, 3});
    k = g.permute(k, {0, 2, 1, 3});
    v = g.permute(v, {0, 2, 1, 3});
    if (attention == AttentionPath::Flash) {
      k = g.cast(k, DType::F16, p + "k_f16");
      v = g.cast(v, DType::F16, p + "v_f16");
    }
    Tensor a = g.attention(q, k, v, Tensor{}, attn, p + "attn");           // [hd, T, H]
    a = g.cast(g.permute(a, {0, 2, 1, 3}), DType::F32, p + "attn_merge");  // [hd, H, T]
    a = vit_linear(g, l.o_w, l.o_b, g.reshape(a, {hd * H, T, 1, 1}), p + "attn_out");
    x = g.add(a, x, p + "attn_res");
    cur = vit_norm(g, x, l.ln2_w, l.ln2_b, hp.eps, p + "ln2");
    cur = vit_ffn(g, l.up_w, l.up_b, l.down_w, l.down_b, hp.ffn_act, cur, p + "ffn");
    x = g.add(x, cur, p + "layer_out");
  }
  return x;
}

}  // namespace kiln
