// The Whisper-style audio encoder of llama.cpp's audio mmproj files, as clip_graph_whisper_enc
// (tools/mtmd/models/whisper-enc.cpp) builds it for the ultravox, qwen2a, voxtral, glma and
// musicflamingo projectors:
//   - stem: conv1d (kernel 3, padding 1) + GELU-erf, conv1d (kernel 3, stride 2, padding 1) +
//     GELU-erf over the log-mel [n_frames, n_mel]: n_frames / 2 positions; the convolutions read
//     their input and kernel as F16 (ggml_conv_1d's im2col);
//   - learned positions (the first n_pos of "a.position_embd.weight");
//   - the pre-norm blocks of models/clip/vit.h ("a.blk.N.*", no K bias in the files, GELU-erf);
//   - where AudioHParams::pools_pairs() (qwen2a, voxtral, musicflamingo): average pooling of pairs
//     of positions (ggml_pool_1d, k = s = 2);
//   - the post LayerNorm;
//   - the projector (models/clip/audio_projector.h).
// Shapes in ggml order.
#pragma once

#include <cstdint>
#include <vector>

#include "core/gguf.h"
#include "core/result.h"
#include "models/clip/audio_hparams.h"
#include "models/clip/audio_projector.h"
#include "models/clip/vit.h"
#include "runtime/graph.h"

namespace kiln {

struct AudioWeights {
  Weight conv1_w, conv1_b;  // [3, n_mel, D], [1, D]
  Weight conv2_w, conv2_b;  // [3, D, D], [1, D]
  Weight pos_embd;          // [D, max positions]
  Weight post_ln_w, post_ln_b;
  std::vector<VitLayer> layers;
  AudioProjectorWeights projector;  // "mm.a.*" (glma: and "v.boi", "v.eoi")
};

// Binds the encoder's and the projector's tensors, checking every shape; the projector's output
// width must be n_embd_out (the text model's). Errors: "mmproj: ..." naming the tensor.
Result<AudioWeights> bind_audio_weights(const GgufFile& file, const AudioHParams& hp, int64_t n_embd_out);

struct AudioEncoderGraph {
  Tensor mel;         // input F32 [n_frames, n_mel]: one chunk's log-mel (MelChunk::data as is)
  Tensor embeddings;  // F32 [n_embd_out, hp.n_output_tokens(n_frames)], marked as output
};

// Adds the encoder and projector for a chunk of n_frames frames (even, its positions within the
// position table) to `g`. Weights are externals named after their GGUF tensors (weight_tensor).
Result<AudioEncoderGraph> build_audio_encoder(Graph& g, const AudioHParams& hp, const AudioWeights& w,
                                              int64_t n_frames, AttentionPath attention);

}  // namespace kiln
