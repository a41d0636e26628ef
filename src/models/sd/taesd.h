// TAESD's decoder (madebyollin's tiny autoencoder) as stable-diffusion.cpp runs it with --taesd
// (TinyDecoder in its model/vae/tae.hpp): the latent through tanh(z / 3) * 3, a 3x3 conv to 64
// channels and a ReLU, then three stages of three blocks (each conv, ReLU, conv, ReLU, conv, plus
// the input, ReLU), a nearest x2 upsample and a bias-free 3x3 conv, a last block and a 3x3 conv to
// RGB in about [0, 1]. SD 1.x/2.x/XL latents (4 channels) only. Its encoder (TinyEncoder), the
// other way: a 3x3 conv to 64 channels and a block, then three times a bias-free stride-2 3x3 conv
// and three blocks, and a 3x3 conv to the 4 latent channels.
//
// Tensor names are a taesd.safetensors file's, under kTaesdDecoderPrefix: N.weight / N.bias for the
// convs at layers 0, 6, 11, 16 (no bias) and 18, N.conv.{0,2,4}.{weight,bias} for the blocks at
// layers 2-4, 7-9, 12-14 and 17. Every shape is checked at bind time.
// Thread-safety: the weights are immutable; graph building is pure.
#pragma once

#include <array>
#include <string>
#include <vector>

#include "core/gguf.h"
#include "core/result.h"
#include "models/sd/sd_layers.h"
#include "runtime/graph.h"

namespace kiln::sd {

inline constexpr const char* kTaesdDecoderPrefix = "decoder.layers";
inline constexpr const char* kTaesdEncoderPrefix = "encoder.layers";

struct TaesdBlock {
  std::array<Conv2d, 3> convs;
};

struct TaesdDecoderWeights {
  Conv2d conv_in;                  // 4 -> 64
  std::vector<TaesdBlock> blocks;  // 10, in order
  std::array<Conv2d, 3> up_convs;  // after each upsample, no bias
  Conv2d conv_out;                 // 64 -> 3
};

Result<TaesdDecoderWeights> bind_taesd_decoder(const GgufFile& file, const std::string& prefix);

struct TaesdEncoderWeights {
  Conv2d conv_in;                    // 3 -> 64 (layer 0)
  std::vector<TaesdBlock> blocks;    // 10: layers 1, 3-5, 7-9, 11-13
  std::array<Conv2d, 3> down_convs;  // layers 2, 6, 10: stride 2, no bias
  Conv2d conv_out;                   // 64 -> 4 (layer 14)
};

// Tensor names under `prefix` (kTaesdEncoderPrefix): N.weight / N.bias and N.conv.{0,2,4}.*.
Result<TaesdEncoderWeights> bind_taesd_encoder(const GgufFile& file, const std::string& prefix);

// z F32 [4, w, h, b] -> RGB F32 [3, 8 w, 8 h, b].
Tensor taesd_decoder_graph(Graph& g, const TaesdDecoderWeights& w, Tensor z);

// x F32 [3, w, h, b], the image in [0, 1] (w and h multiples of 8) -> the latent F32 [4, w / 8, h / 8, b].
Tensor taesd_encoder_graph(Graph& g, const TaesdEncoderWeights& w, Tensor x);

}  // namespace kiln::sd
