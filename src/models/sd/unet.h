// The UNet of SD 1.x and 2.x as stable-diffusion.cpp runs it (UnetModelBlock in its
// model/diffusion/unet.hpp): a sinusoidal timestep embedding through two linears; input blocks of
// ResBlocks (GroupNorm32, SiLU, 3x3 conv, plus the time embedding, GroupNorm32, SiLU, 3x3 conv, plus
// the input or its 1x1 skip conv) and SpatialTransformers (GroupNorm32, 1x1 proj_in, self-attention,
// cross-attention over the text conditioning, a GEGLU feed-forward, each pre-LayerNorm and
// residual, 1x1 proj_out, residual) with stride-2 3x3 downsampling between levels; a middle block;
// output blocks over the input blocks' outputs concatenated in channels, with nearest x2 upsampling
// then a 3x3 conv; GroupNorm32, SiLU, 3x3 conv out.
//
// Widths come from the weights as stable-diffusion.cpp's UNetConfig::detect_from_weights reads them
// (model_channels and in_channels from input_blocks.0.0.weight, time_embed_dim from
// time_embed.0.weight, out_channels from out.2.weight, context_dim from the first attn2.to_k);
// the rest is SD 1.x's and SD 2.x's: channel multipliers 1, 2, 4, 4, two ResBlocks per level,
// transformers at downsampling factors 1, 2, 4. What the version fixes comes in a UnetArch the
// caller fills from diffusion/model_version.h: the heads (SD 1.x: 8 per transformer; SD 2.x: 64
// channels each, num_head_channels) and the tiny variant (SD1 tiny UNet, SDXS-512: one ResBlock per
// level, multipliers 1, 2, 4, no middle block, stable-diffusion.cpp's skipped block indices). A
// transformer's proj_in and proj_out are 1x1 convolutions or, when the file's weights are 2-D,
// linears (use_linear_projection: SD 2.x), as stable-diffusion.cpp's SpatialTransformer reads them.
//
// Tensor names are stable-diffusion.cpp's under a prefix (kSdUnetPrefix for single-file
// checkpoints). Every shape is checked at bind time.
// Thread-safety: the weights are immutable; graph building is pure.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/gguf.h"
#include "core/result.h"
#include "models/sd/sd_layers.h"
#include "runtime/graph.h"

namespace kiln::sd {

inline constexpr const char* kSdUnetPrefix = "model.diffusion_model";

// What the model version fixes and the weights do not say (stable-diffusion.cpp's UNetConfig per
// version).
struct UnetArch {
  bool tiny = false;          // no middle block, stable-diffusion.cpp's tiny_unet block numbering
  int64_t head_channels = 0;  // > 0: each transformer's heads this wide (SD 2.x: 64); 0: num_heads heads
};

struct UnetHParams {
  int64_t in_channels = 4;
  int64_t out_channels = 4;
  int64_t model_channels = 320;
  int64_t time_embed_dim = 1280;
  int64_t context_dim = 768;
  int64_t num_res_blocks = 2;
  std::vector<int64_t> channel_mult = {1, 2, 4, 4};
  std::vector<int64_t> attention_ds = {4, 2, 1};  // downsampling factors with a transformer
  int64_t num_heads = 8;
  UnetArch arch;
};

struct ResBlock {
  Norm in_norm;
  Conv2d in_conv;
  Linear emb;
  Norm out_norm;
  Conv2d out_conv;
  std::optional<Conv2d> skip;  // when the widths differ
};

struct CrossAttention {
  Linear q, k, v, out;
};

// A transformer's 1x1 projection: a convolution, or a linear when `conv` is empty (the same product
// per cell, but stable-diffusion.cpp rounds a convolution's weight and input to F16).
struct Projection {
  std::optional<Conv2d> conv;
  Linear linear;
};

struct SpatialTransformer {
  int64_t n_head = 0;
  Norm norm;
  Projection proj_in, proj_out;
  Norm norm1, norm2, norm3;
  CrossAttention attn1, attn2;
  Linear ff_in;   // GEGLU: [c, 8 c], the first half the value, the second the gate
  Linear ff_out;  // [4 c, c]
};

// One numbered block (input_blocks.N / middle_block / output_blocks.N): what it holds, run in
// this order.
struct UnetBlock {
  std::optional<ResBlock> res;
  std::optional<SpatialTransformer> attn;
  std::optional<ResBlock> res2;  // the middle block's second ResBlock
  std::optional<Conv2d> down;    // stride 2
  std::optional<Conv2d> up;      // after a nearest x2 upsample
};

struct UnetWeights {
  UnetHParams hp;
  Linear time_embed0, time_embed2;
  Conv2d conv_in;
  std::vector<UnetBlock> input;  // input_blocks.1 ...
  std::optional<UnetBlock> middle;
  std::vector<UnetBlock> output;
  Norm out_norm;
  Conv2d conv_out;
};

// Binds the UNet under `prefix` in `file` (which must outlive the weights), of the architecture
// `arch`. Errors name the tensor missing or misshaped, or widths that do not split into heads.
Result<UnetWeights> bind_unet(const GgufFile& file, const std::string& prefix, const UnetArch& arch);

// stable-diffusion.cpp's timestep embedding as ggml_timestep_embedding computes it: for
// j < dim / 2, freq = expf(-logf(max_period) * j / (dim / 2)), [cos(t freq) ..., sin(t freq) ...]
// in float; an odd dim ends with 0.
std::vector<float> timestep_embedding(float t, int64_t dim, int max_period = 10000);

// x: F32 [in_channels, w, h, b] (w and h multiples of 8: three halvings); t_emb: F32
// [model_channels, b] (timestep_embedding); context: F32 [context_dim, n_ctx, b]. Returns F32
// [out_channels, w, h, b].
Tensor unet_graph(Graph& g, const UnetWeights& w, Tensor x, Tensor t_emb, Tensor context);

}  // namespace kiln::sd
