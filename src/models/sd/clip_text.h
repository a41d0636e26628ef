// CLIP's text transformer as stable-diffusion.cpp runs it for the UNet models' conditioning
// (CLIPTextModel in its model/te/clip.hpp): token plus learned position embeddings, pre-norm
// blocks with causal self-attention, then the final LayerNorm. `clip_skip` = k stops after layer
// n_layer - k + 1 (1: all layers); the final LayerNorm follows either way (with_final_ln).
//
// Three encoders, which stable-diffusion.cpp tells apart by the model version and which have
// different widths, so the file's token embedding width says which one it is (clip_text_hparams):
// OpenAI CLIP ViT-L/14 (768 wide, 12 layers, quick GELU: SD 1.x, SDXL's first encoder), OpenCLIP
// ViT-H/14 (1024, 24 layers, GELU: SD 2.x) and OpenCLIP ViT-bigG/14 (1280, 32 layers, GELU, a
// 1280-wide text projection for the pooled output: SDXL's second encoder).
//
// Tensor names, under a prefix, in either spelling stable-diffusion.cpp reads (its
// convert_open_clip_to_hf_clip_name maps the second onto the first):
// - Hugging Face's ("cond_stage_model.transformer.text_model"): embeddings.token_embedding.weight,
//   embeddings.position_embedding.weight, encoder.layers.N.{layer_norm1, self_attn.{q,k,v,out}_proj
//   or self_attn.in_proj (q, k, v fused), layer_norm2, mlp.fc1, mlp.fc2}.{weight,bias},
//   final_layer_norm.{weight,bias}, text_projection;
// - OpenCLIP's, as SD 2.x checkpoints hold it ("cond_stage_model.model"): token_embedding.weight,
//   positional_embedding, transformer.resblocks.N.{ln_1, attn.in_proj_{weight,bias}, attn.out_proj,
//   ln_2, mlp.c_fc, mlp.c_proj}, ln_final, text_projection.
// Every shape is checked at bind time.
// Thread-safety: the weights are immutable; graph building is pure.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/gguf.h"
#include "core/result.h"
#include "models/clip/vit.h"
#include "models/modules.h"
#include "runtime/graph.h"

namespace kiln::sd {

inline constexpr const char* kSd1TextPrefix = "cond_stage_model.transformer.text_model";
// Where SD 2.x single-file checkpoints hold OpenCLIP ViT-H/14, in OpenCLIP's spelling.
inline constexpr const char* kOpenClipTextPrefix = "cond_stage_model.model";

struct ClipTextHParams {  // defaults: OpenAI CLIP ViT-L/14's text tower
  int64_t n_vocab = 49408;
  int64_t n_token = 77;  // positions, and the length of every chunk
  int64_t n_embd = 768;
  int64_t n_ff = 3072;
  int64_t n_head = 12;
  int64_t n_layer = 12;  // the architecture's: clip_skip counts from it
  // The layers bound and run, at most: n_layer, but n_layer - 1 for OpenCLIP-H, whose last layer
  // stable-diffusion.cpp never loads (ModelManager::is_optional_missing_tensor skips it even when
  // the file holds it: its weights stay zero and the layer passes its input through), so that
  // clip_skip 1 gives what 2 gives and files without that layer load.
  int64_t n_layer_run = 12;
  ClipFfnAct act = ClipFfnAct::GeluQuick;
  float eps = 1e-5f;  // the LayerNorms'
};

// The encoder of width `n_embd` (768, 1024 or 1280, see above); nullopt for other widths.
std::optional<ClipTextHParams> clip_text_hparams(int64_t n_embd);

struct ClipTextWeights {
  ClipTextHParams hp;
  Weight token_embd;  // [n_embd, n_vocab]
  Weight pos_embd;    // [n_embd, n_token]
  std::vector<VitLayer> layers;   // q, k, v separate or fused (VitLayer::qkv_w)
  Weight final_ln_w, final_ln_b;  // [n_embd]
};

// Binds the encoder under `prefix` in `file` (which must outlive the weights), its spelling and
// width read from the token embedding. Errors name the tensor that is missing or misshaped, or the
// width that is no CLIP text encoder's.
Result<ClipTextWeights> bind_clip_text(const GgufFile& file, const std::string& prefix);

// The layers that run for `clip_skip` (values <= 0 mean 1, as stable-diffusion.cpp's SD 1.x
// default), at most n_layer_run; an Error when it leaves no layer.
Result<int64_t> clip_text_layers(const ClipTextHParams& hp, int clip_skip);

// ids: I32 [n_token]. Returns F32 [n_embd, n_token]: the hidden states after `n_layers` blocks and
// the final LayerNorm.
Tensor clip_text_graph(Graph& g, const ClipTextWeights& w, Tensor ids, int64_t n_layers);

}  // namespace kiln::sd
