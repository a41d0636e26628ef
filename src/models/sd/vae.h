// The AutoencoderKL decoder of SD 1.x/2.x as stable-diffusion.cpp runs it (AutoEncoderKLModel::decode
// in its model/vae/auto_encoder_kl.hpp): post_quant_conv (1x1), conv_in to 4 ch channels, a middle
// of ResnetBlock, one-head self-attention over the grid's cells, ResnetBlock, then per level (from
// the deepest) three ResnetBlocks and, but for the last, a nearest x2 upsample and a 3x3 conv;
// GroupNorm32, SiLU, a 3x3 conv to RGB in about [-1, 1]. A ResnetBlock is GroupNorm32, SiLU, 3x3
// conv, GroupNorm32, SiLU, 3x3 conv, plus the input or its 1x1 nin_shortcut.
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

// `prefix` is "" for a standalone VAE file, else its tensors are `prefix`.decoder.* (which must
// outlive the weights, as `file`).
Result<VaeDecoderWeights> bind_vae_decoder(const GgufFile& file, const std::string& prefix);

// z F32 [4, w, h, b], the VAE's latent (already divided by the scale) -> F32 [3, 8 w, 8 h, b],
// before stable-diffusion.cpp's (x + 1) / 2.
Tensor vae_decoder_graph(Graph& g, const VaeDecoderWeights& w, Tensor z);

}  // namespace kiln::sd
