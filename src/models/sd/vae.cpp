#include "models/sd/vae.h"

#include <array>

namespace kiln::sd {
namespace {

constexpr int64_t kLatent = 4, kRgb = 3;
constexpr int64_t kDecoderResPerLevel = 3, kEncoderResPerLevel = 2;
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

// x [c, w, h, b] -> [c, w + 1, h + 1, b], zeros in the new last column and row. ref:
// DownSampleBlock::forward's ggml_ext_pad(x, 1, 1, 0, 0) (a view of x times 0 makes the zeros).
Tensor pad_end(Graph& g, Tensor x, const std::string& n) {
  const auto zeros_like_slice = [&](Tensor t, int axis) {
    const TensorView& v = g.tensor(t).view;
    Shape ne = v.ne;
    ne[static_cast<size_t>(axis)] = 1;
    return g.scale(g.view(t, ne, v.nb, 0, n + ".slice"), 0.0f, n + ".zeros");
  };
  x = g.concat(x, zeros_like_slice(x, 1), 1, n + ".pad_w");
  return g.concat(x, zeros_like_slice(x, 2), 2, n + ".pad_h");
}

// The base width from `name` (a 4-D conv whose output width is `mult` times it).
Result<int64_t> base_width(const GgufFile& file, const std::string& name, int64_t mult, bool out) {
  const GgufTensorInfo* t = file.find_tensor(name);
  if (t == nullptr || t->n_dims != 4) return make_error("sd vae: no 4-D '", name, "' (an AutoencoderKL's)");
  const int64_t c = out ? t->ne[3] : t->ne[2];
  if (c % mult != 0 || c / mult < 32 || c / mult % 32 != 0)
    return make_error("sd vae: '", name, "' has ", c, " channels, not ", mult,
                      " times a multiple of 32 (GroupNorm32)");
  return c / mult;
}

}  // namespace

Result<VaeDecoderWeights> bind_vae_decoder(const GgufFile& file, const std::string& prefix) {
  const WeightBinder b(file, "sd vae decoder");
  const std::string top = prefix.empty() ? "" : prefix + ".";
  const std::string p = top + "decoder.";
  VaeDecoderWeights w;
  // ref: detect_decoder_ch: conv_in's output width over the last multiplier.
  KILN_ASSIGN_OR_RETURN(w.ch, base_width(file, p + "conv_in.weight", kMult.back(), true));
  KILN_ASSIGN_OR_RETURN(w.post_quant_conv, bind_conv2d(b, top + "post_quant_conv", kLatent, kLatent, 1));
  int64_t c = w.ch * kMult.back();
  KILN_ASSIGN_OR_RETURN(w.conv_in, bind_conv2d(b, p + "conv_in", kLatent, c, 3));
  KILN_ASSIGN_OR_RETURN(w.mid1, bind_resnet(b, p + "mid.block_1", c, c));
  KILN_ASSIGN_OR_RETURN(w.mid_attn, bind_attention(file, b, p + "mid.attn_1", c));
  KILN_ASSIGN_OR_RETURN(w.mid2, bind_resnet(b, p + "mid.block_2", c, c));
  for (size_t i = kMult.size(); i-- > 0;) {
    VaeDecoderWeights::Level level;
    const std::string up = p + "up." + std::to_string(i);
    for (int64_t j = 0; j < kDecoderResPerLevel; ++j) {
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

Result<VaeEncoderWeights> bind_vae_encoder(const GgufFile& file, const std::string& prefix) {
  const WeightBinder b(file, "sd vae encoder");
  const std::string top = prefix.empty() ? "" : prefix + ".";
  const std::string p = top + "encoder.";
  VaeEncoderWeights w;
  KILN_ASSIGN_OR_RETURN(w.ch, base_width(file, p + "conv_in.weight", 1, true));
  KILN_ASSIGN_OR_RETURN(w.conv_in, bind_conv2d(b, p + "conv_in", kRgb, w.ch, 3));
  int64_t c = w.ch;
  for (size_t i = 0; i < kMult.size(); ++i) {
    VaeEncoderWeights::Level level;
    const std::string down = p + "down." + std::to_string(i);
    for (int64_t j = 0; j < kEncoderResPerLevel; ++j) {
      KILN_ASSIGN_OR_RETURN(VaeResnet r,
                            bind_resnet(b, down + ".block." + std::to_string(j), c, w.ch * kMult[i]));
      level.blocks.push_back(std::move(r));
      c = w.ch * kMult[i];
    }
    if (i + 1 != kMult.size()) {
      KILN_ASSIGN_OR_RETURN(level.downsample, bind_conv2d(b, down + ".downsample.conv", c, c, 3, 2, 0));
    }
    w.levels.push_back(std::move(level));
  }
  KILN_ASSIGN_OR_RETURN(w.mid1, bind_resnet(b, p + "mid.block_1", c, c));
  KILN_ASSIGN_OR_RETURN(w.mid_attn, bind_attention(file, b, p + "mid.attn_1", c));
  KILN_ASSIGN_OR_RETURN(w.mid2, bind_resnet(b, p + "mid.block_2", c, c));
  KILN_ASSIGN_OR_RETURN(w.norm_out, bind_norm(b, p + "norm_out", c));
  KILN_ASSIGN_OR_RETURN(w.conv_out, bind_conv2d(b, p + "conv_out", c, 2 * kLatent, 3));
  KILN_ASSIGN_OR_RETURN(w.quant_conv, bind_conv2d(b, top + "quant_conv", 2 * kLatent, 2 * kLatent, 1));
  return w;
}

Tensor vae_encoder_graph(Graph& g, const VaeEncoderWeights& w, Tensor x) {
  // ref: Encoder::forward, then AutoEncoderKLModel::encode's quant_conv.
  Tensor h = conv2d(g, w.conv_in, x, "conv_in");
  for (size_t l = 0; l < w.levels.size(); ++l) {
    const std::string n = "down" + std::to_string(l);
    for (size_t j = 0; j < w.levels[l].blocks.size(); ++j)
      h = resnet(g, w.levels[l].blocks[j], h, n + ".block" + std::to_string(j));
    if (w.levels[l].downsample)
      h = conv2d(g, *w.levels[l].downsample, pad_end(g, h, n + ".pad"), n + ".downsample");
  }
  h = resnet(g, w.mid1, h, "mid.block_1");
  h = attention(g, w.mid_attn, h, "mid.attn_1");
  h = resnet(g, w.mid2, h, "mid.block_2");
  h = g.silu(group_norm32(g, w.norm_out, h, "norm_out"));
  h = conv2d(g, w.conv_out, h, "conv_out");
  return conv2d(g, w.quant_conv, h, "quant_conv");
}

}  // namespace kiln::sd
