#include "models/sd/unet.h"

#include <algorithm>
#include <cmath>

#include "models/clip/vit.h"

namespace kiln::sd {
namespace {

bool has_attention(const UnetHParams& hp, int64_t ds) {
  return std::find(hp.attention_ds.begin(), hp.attention_ds.end(), ds) != hp.attention_ds.end();
}

Result<ResBlock> bind_res(const WeightBinder& b, const std::string& p, int64_t c_in, int64_t c_out,
                          int64_t emb) {
  ResBlock r;
  KILN_ASSIGN_OR_RETURN(r.in_norm, bind_norm(b, p + "in_layers.0", c_in));
  KILN_ASSIGN_OR_RETURN(r.in_conv, bind_conv2d(b, p + "in_layers.2", c_in, c_out, 3));
  KILN_ASSIGN_OR_RETURN(r.emb, bind_linear(b, p + "emb_layers.1", emb, c_out));
  KILN_ASSIGN_OR_RETURN(r.out_norm, bind_norm(b, p + "out_layers.0", c_out));
  KILN_ASSIGN_OR_RETURN(r.out_conv, bind_conv2d(b, p + "out_layers.3", c_out, c_out, 3));
  if (c_in != c_out) {
    KILN_ASSIGN_OR_RETURN(r.skip, bind_conv2d(b, p + "skip_connection", c_in, c_out, 1));
  }
  return r;
}

Result<CrossAttention> bind_attention(const WeightBinder& b, const std::string& p, int64_t c, int64_t ctx) {
  CrossAttention a;
  KILN_ASSIGN_OR_RETURN(a.q, bind_linear(b, p + "to_q", c, c, false));
  KILN_ASSIGN_OR_RETURN(a.k, bind_linear(b, p + "to_k", ctx, c, false));
  KILN_ASSIGN_OR_RETURN(a.v, bind_linear(b, p + "to_v", ctx, c, false));
  KILN_ASSIGN_OR_RETURN(a.out, bind_linear(b, p + "to_out.0", c, c));
  return a;
}

// ref: SpatialTransformer::init_params: a 2-D proj_out weight makes both projections linears.
Result<Projection> bind_projection(const WeightBinder& b, const std::string& name, int64_t c, bool linear) {
  Projection pr;
  if (linear) {
    KILN_ASSIGN_OR_RETURN(pr.linear, bind_linear(b, name, c, c));
  } else {
    KILN_ASSIGN_OR_RETURN(pr.conv, bind_conv2d(b, name, c, c, 1));
  }
  return pr;
}

Result<SpatialTransformer> bind_transformer(const WeightBinder& b, const std::string& p,
                                            const UnetHParams& hp, int64_t c) {
  SpatialTransformer t;
  // ref: UnetModelBlock's constructor: d_head = num_head_channels when given, n_head = c / d_head.
  const int64_t head_channels = hp.arch.head_channels;
  t.n_head = head_channels > 0 ? c / head_channels : hp.num_heads;
  if (t.n_head < 1 || c % t.n_head != 0 || (head_channels > 0 && t.n_head * head_channels != c))
    return make_error("sd unet: the transformer '", p, "' has ", c, " channels, which do not split into ",
                      head_channels > 0 ? "heads of " + std::to_string(head_channels) + " channels"
                                        : std::to_string(hp.num_heads) + " heads");
  const GgufTensorInfo* proj_out = b.file().find_tensor(p + "proj_out.weight");
  const bool linear = proj_out != nullptr && proj_out->n_dims == 2;
  KILN_ASSIGN_OR_RETURN(t.norm, bind_norm(b, p + "norm", c));
  KILN_ASSIGN_OR_RETURN(t.proj_in, bind_projection(b, p + "proj_in", c, linear));
  const std::string tb = p + "transformer_blocks.0.";
  KILN_ASSIGN_OR_RETURN(t.norm1, bind_norm(b, tb + "norm1", c));
  KILN_ASSIGN_OR_RETURN(t.norm2, bind_norm(b, tb + "norm2", c));
  KILN_ASSIGN_OR_RETURN(t.norm3, bind_norm(b, tb + "norm3", c));
  KILN_ASSIGN_OR_RETURN(t.attn1, bind_attention(b, tb + "attn1.", c, c));
  KILN_ASSIGN_OR_RETURN(t.attn2, bind_attention(b, tb + "attn2.", c, hp.context_dim));
  KILN_ASSIGN_OR_RETURN(t.ff_in, bind_linear(b, tb + "ff.net.0.proj", c, 8 * c));
  KILN_ASSIGN_OR_RETURN(t.ff_out, bind_linear(b, tb + "ff.net.2", 4 * c, c));
  KILN_ASSIGN_OR_RETURN(t.proj_out, bind_projection(b, p + "proj_out", c, linear));
  return t;
}

// The widths stable-diffusion.cpp's detect_from_weights reads from the file.
Result<UnetHParams> detect_hparams(const GgufFile& file, const std::string& p, const UnetArch& arch) {
  UnetHParams hp;
  hp.arch = arch;
  const GgufTensorInfo* in = file.find_tensor(p + "input_blocks.0.0.weight");
  const GgufTensorInfo* te = file.find_tensor(p + "time_embed.0.weight");
  const GgufTensorInfo* out = file.find_tensor(p + "out.2.weight");
  const GgufTensorInfo* ctx = file.find_tensor(p + "input_blocks.1.1.transformer_blocks.0.attn2.to_k.weight");
  if (in == nullptr || in->n_dims != 4 || te == nullptr || te->n_dims != 2 || out == nullptr ||
      out->n_dims != 4 || ctx == nullptr || ctx->n_dims != 2)
    return make_error(
        "sd unet: no UNet under '", p,
        "' (input_blocks.0.0, time_embed.0, out.2 and input_blocks.1.1's attn2.to_k are needed)");
  hp.in_channels = in->ne[2];
  hp.model_channels = te->ne[0];
  hp.time_embed_dim = te->ne[1];
  hp.out_channels = out->ne[3];
  hp.context_dim = ctx->ne[0];
  if (hp.model_channels < 32 || hp.model_channels % 32 != 0)
    return make_error("sd unet: ", hp.model_channels, " base channels: GroupNorm32 needs a multiple of 32");
  if (arch.tiny) {
    hp.num_res_blocks = 1;
    hp.channel_mult = {1, 2, 4};
  }
  return hp;
}

// x [c, w, h, b] -> the same; emb_act = silu(time embedding) [time_embed_dim, b].
Tensor res_block(Graph& g, const ResBlock& r, Tensor x, Tensor emb_act, const std::string& n) {
  // ref: ResBlock::forward (model/common/block.hpp).
  Tensor h = conv2d(g, r.in_conv, g.silu(group_norm32(g, r.in_norm, x, n + ".in_norm")), n + ".in_conv");
  const int64_t c = g.tensor(h).view.ne[0], b = g.tensor(h).view.ne[3];
  const Tensor e = g.reshape(linear(g, r.emb, emb_act, n + ".emb"), {c, 1, 1, b});
  h = g.add(h, e, n + "+emb");
  h = conv2d(g, r.out_conv, g.silu(group_norm32(g, r.out_norm, h, n + ".out_norm")), n + ".out_conv");
  const Tensor skip = r.skip ? conv2d(g, *r.skip, x, n + ".skip") : x;
  return g.add(h, skip, n + "+skip");
}

// x [c, n_q, b], ctx [c_ctx, n_kv, b] -> [c, n_q, b]. ref: CrossAttention::forward.
Tensor attention(Graph& g, const CrossAttention& a, int64_t n_head, Tensor x, Tensor ctx,
                 const std::string& n) {
  const Tensor o = multi_head_attention(g, linear(g, a.q, x, n + ".q"), linear(g, a.k, ctx, n + ".k"),
                                        linear(g, a.v, ctx, n + ".v"), n_head, n);
  return linear(g, a.out, o, n + ".out");
}

// x [c, w, h, b] (or [c, w * h, b]) -> the same shape.
Tensor project(Graph& g, const Projection& pr, Tensor x, const std::string& n) {
  return pr.conv ? conv2d(g, *pr.conv, x, n) : linear(g, pr.linear, x, n);
}

// x [c, w, h, b], context [c_ctx, n_ctx, b] -> [c, w, h, b].
Tensor spatial_transformer(Graph& g, const SpatialTransformer& t, Tensor x, Tensor context,
                           const std::string& n) {
  // ref: SpatialTransformer::forward (either projection: the same layout here) and BasicTransformerBlock:
  // the grid's cells are the tokens, [c, w * h, b] in this layout.
  const Shape xn = g.tensor(x).view.ne;
  Tensor h = project(g, t.proj_in, group_norm32(g, t.norm, x, n + ".norm"), n + ".proj_in");
  h = g.reshape(h, {xn[0], xn[1] * xn[2], xn[3], 1});
  const Tensor h1 = layer_norm(g, t.norm1, h, n + ".norm1");
  h = g.add(attention(g, t.attn1, t.n_head, h1, h1, n + ".attn1"), h, n + "+attn1");
  h = g.add(attention(g, t.attn2, t.n_head, layer_norm(g, t.norm2, h, n + ".norm2"), context, n + ".attn2"),
            h, n + "+attn2");
  // GEGLU: ref: GEGLU::forward: the projection's first half times gelu(second half).
  const Tensor proj = linear(g, t.ff_in, layer_norm(g, t.norm3, h, n + ".norm3"), n + ".ff_in");
  const Shape pn = g.tensor(proj).view.ne;
  const int64_t inner = pn[0] / 2;
  const auto half = [&](int64_t i, const char* what) {
    const TensorView& v = g.tensor(proj).view;
    return g.view(proj, {inner, pn[1], pn[2], pn[3]}, v.nb, static_cast<size_t>(i * inner) * v.nb[0],
                  n + what);
  };
  const Tensor ff = g.mul(half(0, ".ff_value"), g.gelu(half(1, ".ff_gate"), n + ".ff_gelu"), n + ".geglu");
  h = g.add(linear(g, t.ff_out, ff, n + ".ff_out"), h, n + "+ff");
  h = g.reshape(h, xn);
  return g.add(project(g, t.proj_out, h, n + ".proj_out"), x, n + "+x");
}

Tensor run_block(Graph& g, const UnetBlock& blk, Tensor h, Tensor emb_act, Tensor context,
                 const std::string& n) {
  if (blk.res) h = res_block(g, *blk.res, h, emb_act, n + ".res");
  if (blk.attn) h = spatial_transformer(g, *blk.attn, h, context, n + ".attn");
  if (blk.res2) h = res_block(g, *blk.res2, h, emb_act, n + ".res2");
  if (blk.down) h = conv2d(g, *blk.down, h, n + ".down");
  if (blk.up) h = conv2d(g, *blk.up, g.upscale(h, 2, n + ".upscale"), n + ".up");
  return h;
}

}  // namespace

Result<UnetWeights> bind_unet(const GgufFile& file, const std::string& prefix, const UnetArch& arch) {
  const std::string p = prefix + ".";
  UnetWeights w;
  KILN_ASSIGN_OR_RETURN(w.hp, detect_hparams(file, p, arch));
  const UnetHParams& hp = w.hp;
  const WeightBinder b(file, "sd unet");
  const int64_t mc = hp.model_channels, emb = hp.time_embed_dim;
  KILN_ASSIGN_OR_RETURN(w.time_embed0, bind_linear(b, p + "time_embed.0", mc, emb));
  KILN_ASSIGN_OR_RETURN(w.time_embed2, bind_linear(b, p + "time_embed.2", emb, emb));
  KILN_ASSIGN_OR_RETURN(w.conv_in, bind_conv2d(b, p + "input_blocks.0.0", hp.in_channels, mc, 3));
  // ref: UnetModelBlock's constructor: the block numbering, widths and the skip widths stack.
  std::vector<int64_t> skip_chans{mc};
  int64_t ch = mc, idx = 0, ds = 1;
  const size_t levels = hp.channel_mult.size();
  for (size_t i = 0; i < levels; ++i) {
    for (int64_t j = 0; j < hp.num_res_blocks; ++j) {
      const std::string n = p + "input_blocks." + std::to_string(++idx) + ".";
      UnetBlock blk;
      KILN_ASSIGN_OR_RETURN(blk.res, bind_res(b, n + "0.", ch, hp.channel_mult[i] * mc, emb));
      ch = hp.channel_mult[i] * mc;
      if (has_attention(hp, ds)) {
        KILN_ASSIGN_OR_RETURN(blk.attn, bind_transformer(b, n + "1.", hp, ch));
      }
      w.input.push_back(std::move(blk));
      skip_chans.push_back(ch);
      if (hp.arch.tiny) ++idx;
    }
    if (i + 1 != levels) {
      UnetBlock blk;
      KILN_ASSIGN_OR_RETURN(
          blk.down, bind_conv2d(b, p + "input_blocks." + std::to_string(++idx) + ".0.op", ch, ch, 3, 2, 1));
      w.input.push_back(std::move(blk));
      skip_chans.push_back(ch);
      ds *= 2;
    }
  }
  if (!hp.arch.tiny) {
    UnetBlock mid;
    KILN_ASSIGN_OR_RETURN(mid.res, bind_res(b, p + "middle_block.0.", ch, ch, emb));
    KILN_ASSIGN_OR_RETURN(mid.attn, bind_transformer(b, p + "middle_block.1.", hp, ch));
    KILN_ASSIGN_OR_RETURN(mid.res2, bind_res(b, p + "middle_block.2.", ch, ch, emb));
    w.middle = std::move(mid);
  }
  idx = 0;
  for (size_t ii = levels; ii-- > 0;) {
    for (int64_t j = 0; j <= hp.num_res_blocks; ++j) {
      const int64_t skip = skip_chans.back();
      skip_chans.pop_back();
      const std::string n = p + "output_blocks." + std::to_string(idx) + ".";
      UnetBlock blk;
      KILN_ASSIGN_OR_RETURN(blk.res, bind_res(b, n + "0.", ch + skip, hp.channel_mult[ii] * mc, emb));
      ch = hp.channel_mult[ii] * mc;
      int64_t up_idx = 1;
      if (has_attention(hp, ds)) {
        KILN_ASSIGN_OR_RETURN(blk.attn, bind_transformer(b, n + "1.", hp, ch));
        ++up_idx;
      }
      std::string up_block = n;
      if (ii > 0 && j == hp.num_res_blocks) {
        // ref: the tiny UNet's upsampler sits in the next numbered block (at index 1 in block 2).
        if (hp.arch.tiny) {
          ++idx;
          if (idx == 2) up_idx = 1;
          up_block = p + "output_blocks." + std::to_string(idx) + ".";
        }
        KILN_ASSIGN_OR_RETURN(blk.up, bind_conv2d(b, up_block + std::to_string(up_idx) + ".conv", ch, ch, 3));
        ds /= 2;
      }
      w.output.push_back(std::move(blk));
      ++idx;
    }
  }
  KILN_ASSIGN_OR_RETURN(w.out_norm, bind_norm(b, p + "out.0", ch));
  KILN_ASSIGN_OR_RETURN(w.conv_out, bind_conv2d(b, p + "out.2", mc, hp.out_channels, 3));
  return w;
}

std::vector<float> timestep_embedding(float t, int64_t dim, int max_period) {
  // ref: ggml_compute_forward_timestep_embedding_f32.
  std::vector<float> e(static_cast<size_t>(dim), 0.0f);
  const int64_t half = dim / 2;
  for (int64_t j = 0; j < half; ++j) {
    const float freq = std::exp(-std::log(static_cast<float>(max_period)) * static_cast<float>(j) /
                                static_cast<float>(half));
    const float arg = t * freq;
    e[static_cast<size_t>(j)] = std::cos(arg);
    e[static_cast<size_t>(j + half)] = std::sin(arg);
  }
  return e;
}

Tensor unet_graph(Graph& g, const UnetWeights& w, Tensor x, Tensor t_emb, Tensor context) {
  // ref: UnetModelBlock::forward.
  Tensor emb = linear(g, w.time_embed0, t_emb, "time_embed.0");
  emb = linear(g, w.time_embed2, g.silu(emb), "time_embed.2");
  const Tensor emb_act = g.silu(emb, "emb_silu");  // every ResBlock's emb_layers start with SiLU
  Tensor h = conv2d(g, w.conv_in, x, "conv_in");
  std::vector<Tensor> skips{h};
  for (size_t i = 0; i < w.input.size(); ++i) {
    h = run_block(g, w.input[i], h, emb_act, context, "in" + std::to_string(i + 1));
    skips.push_back(h);
  }
  if (w.middle) h = run_block(g, *w.middle, h, emb_act, context, "mid");
  for (size_t i = 0; i < w.output.size(); ++i) {
    h = g.concat(h, skips.back(), 0, "out" + std::to_string(i) + ".cat");
    skips.pop_back();
    h = run_block(g, w.output[i], h, emb_act, context, "out" + std::to_string(i));
  }
  h = g.silu(group_norm32(g, w.out_norm, h, "out_norm"));
  return conv2d(g, w.conv_out, h, "conv_out");
}

}  // namespace kiln::sd
