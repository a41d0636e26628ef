// The AutoencoderKL of SD 1.x/2.x as stable-diffusion.cpp runs it (AutoEncoderKLModel::decode and
// ::encode in its model/vae/auto_encoder_kl.hpp). The decoder: post_quant_conv (1x1), conv_in to 4 ch
// channels, a middle of ResnetBlock, one-head self-attention over the grid's cells, ResnetBlock, then per
// level (from the deepest) three ResnetBlocks and, but for the last, a nearest x2 upsample and a 3x3 conv;
// GroupNorm32, SiLU, a 3x3 conv to RGB in about [-1, 1]. A ResnetBlock is GroupNorm32, SiLU, 3x3
// conv, GroupNorm32, SiLU, 3x3 conv, plus the input or its 1x1 nin_shortcut. The encoder, the other
// way: conv_in to ch channels, per level two ResnetBlocks and, but for the last, a stride-2 3x3
// conv over the input padded by one zero row and column at the end; the same middle; GroupNorm32,
// SiLU, a 3x3 conv to 8 channels and quant_conv (1x1): the moments, 4 means and 4 log-variances.
//
// Widths: SD's (multipliers 1, 2, 4, 4, 4 latent channels), the base width ch read from
// decoder.conv_in as stable-diffusion.cpp's detect_decoder_ch reads it (128 in SD's VAE). The middle
// attention's q/k/v/proj_out are 1x1 convs or, in files that hold them as 2-D weights, linears.
// Tensor names are ldm's (decoder.up.I.block.J.norm1 ...) under a prefix: kSdVaePrefix in a
// single-file checkpoint, none in a standalone VAE file. Every shape is checked at bind time.
// Thread-safety: the weights are immutable; graph building is pure.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/gguf.h"
#include "core/result.h"
#include "models/sd/sd_layers.h"
#include "runtime/graph.h"

namespace kiln::sd {

inline constexpr const char* kSdVaePrefix = "first_stage_model";
// SD 1.x/2.x's latent scale: the VAE decodes latent / kSd1VaeScale (diffusion_to_vae_latents).
inline constexpr float kSd1VaeScale = 0.18215f;

struct VaeResnet {
  Norm norm1;
  Conv2d conv1;
  Norm norm2;
  Conv2d conv2;
  std::optional<Conv2d> nin_shortcut;  // when the widths differ
};

// q, k, v and proj_out, in that order: 1x1 convs (ldm's files) or, when `linear`, linears.
struct VaeAttention {
  Norm norm;
  bool linear = false;
  std::array<Conv2d, 4> convs;
  std::array<Linear, 4> linears;
};

struct VaeDecoderWeights {
  int64_t ch = 128;
  Conv2d post_quant_conv;  // 1x1, 4 -> 4
  Conv2d conv_in;          // 4 -> 4 ch
  VaeResnet mid1, mid2;
  VaeAttention mid_attn;
  struct Level {
    std::vector<VaeResnet> blocks;   // 3
    std::optional<Conv2d> upsample;  // after a nearest x2 upsample; none at the last level
  };
  std::vector<Level> levels;  // in run order: up.3, up.2, up.1, up.0
  Norm norm_out;
  Conv2d conv_out;  // -> 3
};

struct VaeEncoderWeights {
  int64_t ch = 128;
  Conv2d conv_in;  // 3 -> ch
  struct Level {
    std::vector<VaeResnet> blocks;     // 2
    std::optional<Conv2d> downsample;  // stride 2, no padding (the input padded at the end)
  };
  std::vector<Level> levels;  // down.0 ... down.3
  VaeResnet mid1, mid2;
  VaeAttention mid_attn;
  Norm norm_out;
  Conv2d conv_out;    // -> 8
  Conv2d quant_conv;  // 1x1, 8 -> 8
};

// `prefix` is "" for a standalone VAE file, else its tensors are `prefix`.decoder.* (which must
// outlive the weights, as `file`).
Result<VaeDecoderWeights> bind_vae_decoder(const GgufFile& file, const std::string& prefix);

// z F32 [4, w, h, b], the VAE's latent (already divided by the scale) -> F32 [3, 8 w, 8 h, b],
// before stable-diffusion.cpp's (x + 1) / 2.
Tensor vae_decoder_graph(Graph& g, const VaeDecoderWeights& w, Tensor z);

// As bind_vae_decoder, the encoder (`prefix`.encoder.* and quant_conv); its base width from
// encoder.conv_in.
Result<VaeEncoderWeights> bind_vae_encoder(const GgufFile& file, const std::string& prefix);

// x F32 [3, w, h, b], the image in [-1, 1] (w and h multiples of 8) -> F32 [8, w / 8, h / 8, b]:
// the moments, means in channels 0-3, log-variances in 4-7.
Tensor vae_encoder_graph(Graph& g, const VaeEncoderWeights& w, Tensor x);

}  // namespace kiln::sd
