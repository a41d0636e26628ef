#include "models/sd/vae.h"

#include <array>

namespace kiln::sd {
namespace {

constexpr int64_t kLatent = 4, kRgb = 3, kResPerLevel = 3;
constexpr std::array<int64_t, 4> kMult = {1, 2, 4, 4};

Result<VaeResnet> bind_resnet(const WeightBinder& b, const std::string& p, int64_t c_in, int64_t c_out) {
  VaeResnet r;
  KILN_ASSIGN_OR_RETURN(r.norm1, bind_norm(b, p + ".norm1", c_in));
  KILN_ASSIGN_OR_RETURN(r.conv1, bind_conv2d(b, p + ".conv1", c_in, c_out, 3));
  KILN_ASSIGN_OR_RETURN(r.norm2, bind_norm(b, p + ".norm2", c_out));
  KILN_ASSIGN_OR_RETURN(r.conv2, bind_conv2d(b, p + ".conv2", c_out, c_out, 3));
  if (c_in != c_out) {
    KILN_ASSIGN_OR_RETURN(r.nin_shortcut, bind_conv2d(b, p + ".nin_shortcut", c_in, c_out, 1));
  }
  return r;
}

Result<VaeAttention> bind_attention(const GgufFile& file, const WeightBinder& b, const std::string& p,
                                    int64_t c) {
  VaeAttention a;
  KILN_ASSIGN_OR_RETURN(a.norm, bind_norm(b, p + ".norm", c));
  // ref: AttnBlock::init_params: a 2-D proj_out.weight makes all four linears.
  const GgufTensorInfo* proj = file.find_tensor(p + ".proj_out.weight");
  a.linear = proj != nullptr && proj->n_dims == 2;
  const char* names[] = {".q", ".k", ".v", ".proj_out"};
  for (size_t i = 0; i < 4; ++i) {
    if (a.linear) {
      KILN_ASSIGN_OR_RETURN(a.linears[i], bind_linear(b, p + names[i], c, c));
    } else {
      KILN_ASSIGN_OR_RETURN(a.convs[i], bind_conv2d(b, p + names[i], c, c, 1));
    }
  }
  return a;
}

// x [c_in, w, h, b] -> [c_out, w, h, b]. ref: ResnetBlock::forward (no time embedding).
Tensor resnet(Graph& g, const VaeResnet& r, Tensor x, const std::string& n) {
  Tensor h = conv2d(g, r.conv1, g.silu(group_norm32(g, r.norm1, x, n + ".norm1")), n + ".conv1");
  h = conv2d(g, r.conv2, g.silu(group_norm32(g, r.norm2, h, n + ".norm2")), n + ".conv2");
  const Tensor skip = r.nin_shortcut ? conv2d(g, *r.nin_shortcut, x, n + ".nin_shortcut") : x;
  return g.add(h, skip, n + "+x");
}

// x [c, w, h, b] -> the same. ref: AttnBlock::forward: one head over the w * h cells (w fastest).
Tensor attention(Graph& g, const VaeAttention& a, Tensor x, const std::string& n) {
  const Shape xn = g.tensor(x).view.ne;
  const Tensor h = group_norm32(g, a.norm, x, n + ".norm");
  const auto project = [&](size_t i, Tensor in, const char* what) {
    return a.linear ? linear(g, a.linears[i], in, n + what) : conv2d(g, a.convs[i], in, n + what);
  };
  const auto tokens = [&](Tensor t) { return g.reshape(t, {xn[0], xn[1] * xn[2], xn[3], 1}); };
  Tensor o = multi_head_attention(g, tokens(project(0, h, ".q")), tokens(project(1, h, ".k")),
                                  tokens(project(2, h, ".v")), 1, n);
  o = project(3, g.reshape(o, xn), ".proj_out");
  return g.add(o, x, n + "+x");
}

}  // namespace

Result<VaeDecoderWeights> bind_vae_decoder(const GgufFile& file, const std::string& prefix) {
  const WeightBinder b(file, "sd vae decoder");
  const std::string top = prefix.empty() ? "" : prefix + ".";
  const std::string p = top + "decoder.";
  VaeDecoderWeights w;
  // ref: detect_decoder_ch: conv_in's output width over the last multiplier.
  const GgufTensorInfo* in = file.find_tensor(p + "conv_in.weight");
  if (in == nullptr || in->n_dims != 4)
    return make_error("sd vae decoder: no 4-D '", p, "conv_in.weight' (an AutoencoderKL's decoder)");
  if (in->ne[3] % kMult.back() != 0 || in->ne[3] / kMult.back() < 32 || in->ne[3] / kMult.back() % 32 != 0)
    return make_error("sd vae decoder: conv_in's ", in->ne[3],
                      " output channels are not 4 times a multiple of 32 (GroupNorm32)");
  w.ch = in->ne[3] / kMult.back();
  KILN_ASSIGN_OR_RETURN(w.post_quant_conv, bind_conv2d(b, top + "post_quant_conv", kLatent, kLatent, 1));
  int64_t c = w.ch * kMult.back();
  KILN_ASSIGN_OR_RETURN(w.conv_in, bind_conv2d(b, p + "conv_in", kLatent, c, 3));
  KILN_ASSIGN_OR_RETURN(w.mid1, bind_resnet(b, p + "mid.block_1", c, c));
  KILN_ASSIGN_OR_RETURN(w.mid_attn, bind_attention(file, b, p + "mid.attn_1", c));
  KILN_ASSIGN_OR_RETURN(w.mid2, bind_resnet(b, p + "mid.block_2", c, c));
  for (size_t i = kMult.size(); i-- > 0;) {
    VaeDecoderWeights::Level level;
    const std::string up = p + "up." + std::to_string(i);
    for (int64_t j = 0; j < kResPerLevel; ++j) {
      KILN_ASSIGN_OR_RETURN(VaeResnet r,
                            bind_resnet(b, up + ".block." + std::to_string(j), c, w.ch * kMult[i]));
      level.blocks.push_back(std::move(r));
      c = w.ch * kMult[i];
    }
    if (i != 0) {
      KILN_ASSIGN_OR_RETURN(level.upsample, bind_conv2d(b, up + ".upsample.conv", c, c, 3));
    }
    w.levels.push_back(std::move(level));
  }
  KILN_ASSIGN_OR_RETURN(w.norm_out, bind_norm(b, p + "norm_out", c));
  KILN_ASSIGN_OR_RETURN(w.conv_out, bind_conv2d(b, p + "conv_out", c, kRgb, 3));
  return w;
}

Tensor vae_decoder_graph(Graph& g, const VaeDecoderWeights& w, Tensor z) {
  // ref: AutoEncoderKLModel::decode (post_quant_conv) and Decoder::forward.
  Tensor h = conv2d(g, w.post_quant_conv, z, "post_quant_conv");
  h = conv2d(g, w.conv_in, h, "conv_in");
  h = resnet(g, w.mid1, h, "mid.block_1");
  h = attention(g, w.mid_attn, h, "mid.attn_1");
  h = resnet(g, w.mid2, h, "mid.block_2");
  for (size_t l = 0; l < w.levels.size(); ++l) {
    const std::string n = "up" + std::to_string(w.levels.size() - 1 - l);
    for (size_t j = 0; j < w.levels[l].blocks.size(); ++j)
      h = resnet(g, w.levels[l].blocks[j], h, n + ".block" + std::to_string(j));
    if (w.levels[l].upsample)
      h = conv2d(g, *w.levels[l].upsample, g.upscale(h, 2, n + ".upscale"), n + ".upsample");
  }
  h = g.silu(group_norm32(g, w.norm_out, h, "norm_out"));
  return conv2d(g, w.conv_out, h, "conv_out");
}

}  // namespace kiln::sd
