// CLIP's text transformer as stable-diffusion.cpp runs it for the UNet models' conditioning
// (CLIPTextModel in its model/te/clip.hpp): token plus learned position embeddings, pre-norm
// blocks with causal self-attention, then the final LayerNorm. `clip_skip` = k stops after layer
// n_layer - k + 1 (1: all layers); the final LayerNorm follows either way, as it does for SD 1.x
// (with_final_ln). Only OpenAI CLIP ViT-L/14 (SD 1.x's encoder, quick GELU) for now.
//
// Tensor names are stable-diffusion.cpp's, under a prefix ("cond_stage_model.transformer.text_model"
// for SD 1.x): embeddings.token_embedding.weight, embeddings.position_embedding.weight,
// encoder.layers.N.{layer_norm1,self_attn.{q,k,v,out}_proj,layer_norm2,mlp.fc1,mlp.fc2}.{weight,bias},
// final_layer_norm.{weight,bias}. Every shape is checked at bind time.
// Thread-safety: the weights are immutable; graph building is pure.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/gguf.h"
#include "core/result.h"
#include "models/clip/vit.h"
#include "models/modules.h"
#include "runtime/graph.h"

namespace kiln::sd {

inline constexpr const char* kSd1TextPrefix = "cond_stage_model.transformer.text_model";

struct ClipTextHParams {  // OpenAI CLIP ViT-L/14's text tower
  int64_t n_vocab = 49408;
  int64_t n_token = 77;  // positions, and the length of every chunk
  int64_t n_embd = 768;
  int64_t n_ff = 3072;
  int64_t n_head = 12;
  int64_t n_layer = 12;
  float eps = 1e-5f;  // the LayerNorms'
};

struct ClipTextWeights {
  ClipTextHParams hp;
  Weight token_embd;  // [n_embd, n_vocab]
  Weight pos_embd;    // [n_embd, n_token]
  std::vector<VitLayer> layers;
  Weight final_ln_w, final_ln_b;  // [n_embd]
};

// Binds the encoder under `prefix` in `file`, which must outlive the weights.
Result<ClipTextWeights> bind_clip_text(const GgufFile& file, const std::string& prefix);

// The layers that run for `clip_skip` (values <= 0 mean 1, as stable-diffusion.cpp's SD 1.x
// default); an Error when it leaves no layer.
Result<int64_t> clip_text_layers(const ClipTextHParams& hp, int clip_skip);

// ids: I32 [n_token]. Returns F32 [n_embd, n_token]: the hidden states after `n_layers` blocks and
// the final LayerNorm.
Tensor clip_text_graph(Graph& g, const ClipTextWeights& w, Tensor ids, int64_t n_layers);

}  // namespace kiln::sd
