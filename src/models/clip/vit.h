// The vision transformer (ViT) that llama.cpp's mmproj files share between projectors: patch
// embedding (a convolution with stride = kernel = patch size), learned position embeddings, an
// optional class token, pre-norm blocks (LayerNorm, multi-head self-attention with biases,
// LayerNorm, feed-forward), optional pre and post LayerNorms. Tensor names as llama.cpp writes
// them ("v.patch_embd.weight", "v.blk.N.attn_q.weight", ...). The graph pieces follow
// clip_graph::build_inp / build_vit / build_attn (tools/mtmd/clip.cpp) op for op, so the numbers
// agree with llama.cpp's CPU backend.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "core/gguf.h"
#include "core/result.h"
#include "image/image.h"
#include "models/clip/clip_hparams.h"
#include "models/modules.h"
#include "runtime/graph.h"

namespace kiln {

struct VitLayer {
  Weight ln1_w, ln1_b;            // [n_embd]
  Weight q_w, k_w, v_w, o_w;      // [n_embd, n_head * head_dim] (k, v: n_head_kv heads); o [n_head * head_dim, n_embd]
  Weight q_b, k_b, v_b, o_b;      // optional biases
  // Or q, k and v fused, with q_w, k_w, v_w empty: [n_embd, q + 2 kv widths] (q's rows first, then
  // k's, then v's; OpenCLIP's in_proj) and its optional bias.
  Weight qkv_w, qkv_b;
  Weight ln2_w, ln2_b;            // [n_embd]
  Weight up_w, up_b, down_w, down_b;  // [n_embd, n_ff], [n_ff, n_embd]; biases optional
};

struct VitWeights {
  Weight patch_embd;  // [patch, patch, 3, n_embd]: a convolution kernel
  Weight patch_bias;  // [n_embd], optional
  Weight class_embd;  // [n_embd], optional: a class token appended after the patches
  Weight pos_embd;    // [n_embd, n_patches (+ 1 with a class token)]
  Weight pre_ln_w, pre_ln_b, post_ln_w, post_ln_b;  // optional
  std::vector<VitLayer> layers;
};

// The shape of the blocks vit_blocks builds (a ViT's, or the Whisper audio encoder's).
struct VitDims {
  int64_t head_dim = 0, n_head = 0, n_head_kv = 0;
  float eps = 0.0f;  // the LayerNorms'
  ClipFfnAct ffn_act = ClipFfnAct::Gelu;
  bool causal = false;  // token i attends to tokens j <= i only (CLIP's text encoder)
};
VitDims vit_dims(const ClipHParams& hp);

// Binds the n_layer pre-norm blocks "<prefix>.blk.N.*" ("v" for vision, "a" for audio) of width D,
// feed-forward width F and attention widths q_width / kv_width, checking every shape; other block
// variants are refused naming the tensor (see bind_vit_weights).
Result<std::vector<VitLayer>> bind_vit_layers(const GgufFile& file, const std::string& prefix, int64_t n_layer,
                                              int64_t D, int64_t F, int64_t q_width, int64_t kv_width);

// Binds the ViT's tensors, checking every shape. Files of other ViT variants (fused qkv, q/k
// norms, gated or mixture-of-experts feed-forward, layer scales) are refused naming the tensor.
// Legacy files whose ffn_up and ffn_down are swapped are read the way llama.cpp reads them.
Result<VitWeights> bind_vit_weights(const GgufFile& file, const ClipHParams& hp);

// The image as the patch convolution reads it (clip's inp_raw through ggml's im2col): for each
// patch, row-major over the grid of patches_per_side^2, its 3 x patch x patch values (channel,
// then row, then column), each (v / 255 - mean) / std in float. `out` holds n_patches * 3 * patch^2
// floats; `img` must be image_size x image_size.
void image_to_patches(const RgbImage& img, const ClipHParams& hp, std::span<float> out);

// Graph pieces. Shapes in ggml order: [n_embd, n_tokens].
//   vit_patch_embeddings: patches F32 [3 * patch^2, n_patches] -> [n_embd, n_patches]; pixels and
//     kernel go through F16 as ggml_conv_2d's im2col does; plus the patch bias.
//   vit_blocks: the first n_layers of `layers` over x [n_embd, n_tokens], bidirectional attention
//     unless dims.causal.
//   vit_norm: LayerNorm (eps) times w plus b (either optional).
//   vit_linear: w x (+ b).
//   vit_ffn: down (act (up x (+ up_b))) (+ down_b), clip_graph::build_ffn without a gate: the
//     blocks' feed-forward and the audio projectors' MLPs.
Tensor vit_patch_embeddings(Graph& g, const ClipHParams& hp, const VitWeights& w, Tensor patches);
Tensor vit_blocks(Graph& g, const VitDims& dims, std::span<const VitLayer> layers, Tensor x, int64_t n_layers,
                  AttentionPath attention);
Tensor vit_norm(Graph& g, Tensor x, const Weight& w, const Weight& b, float eps, const std::string& name);
Tensor vit_linear(Graph& g, const Weight& w, const Weight& b, Tensor x, const std::string& name);
Tensor vit_ffn(Graph& g, const Weight& up_w, const Weight& up_b, const Weight& down_w, const Weight& down_b,
               ClipFfnAct act, Tensor x, const std::string& name);
// The graph tensor of a bound weight (Tensor{} for an absent one).
Tensor weight_tensor(Graph& g, const Weight& w);
// The same as F32 values, cast in the graph when the file holds another type (an F16 or Q8_0
// norm gain or bias): what the networks add and multiply by is F32, as stable-diffusion.cpp's and
// llama.cpp's loaders convert such tensors to the F32 their models declare. The cast is exact for
// F16 and BF16 and dequantizes a quantized tensor as ggml's to_float does.
Tensor f32_weight_tensor(Graph& g, const Weight& w, const std::string& name);

}  // namespace kiln
