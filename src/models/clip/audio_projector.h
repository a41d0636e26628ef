// The projectors of llama.cpp's Whisper-style audio mmproj files ("mm.a.*"): what turns the
// encoder's output [D, n_pos] (after its average pooling and post LayerNorm) into rows of the text
// model's width, as clip_graph_whisper_enc (tools/mtmd/models/whisper-enc.cpp) builds them:
//   ultravox: stack `stack_factor` positions, RMSNorm (1e-6) * norm_pre, mlp.1, SwiGLU with the
//     halves swapped (silu of the second half times the first), RMSNorm * norm_mid, mlp.2;
//   qwen2a: fc (+ bias);
//   voxtral: stack, mlp.1, GELU-erf, mlp.2 (llama.cpp reads no biases for it);
//   musicflamingo: mlp.1 + bias, GELU-erf, mlp.2 + bias (no stacking: llama.cpp's
//     audio_has_stack_frames leaves it out, and its converter writes no stack factor);
//   glma: LayerNorm (the encoder's eps) * norm_pre + its bias, stack, mlp.1 + bias, GELU-erf,
//     mlp.2 + bias, then the begin-of-audio row "v.boi" before and the end row "v.eoi" after.
// A partial last stack is dropped (AudioHParams::n_output_tokens' count; llama.cpp's graph pads it
// with zeros while its count drops it, and it aborts on the difference). Shapes in ggml order.
#pragma once

#include <cstdint>

#include "core/gguf.h"
#include "core/result.h"
#include "models/clip/audio_hparams.h"
#include "models/modules.h"
#include "runtime/graph.h"

namespace kiln {

// Which are bound depends on the type; D is the encoder's width, S its stack factor.
struct AudioProjectorWeights {
  Weight norm_pre_w, norm_pre_b;  // ultravox: [D * S], no bias; glma: [D], [D]
  Weight norm_mid;                // ultravox: [hidden]
  Weight mlp1_w, mlp1_b;          // [D * S (musicflamingo: D), hidden (ultravox: 2 * hidden)], [hidden]
  Weight mlp2_w, mlp2_b;          // [hidden, n_out], [n_out]
  Weight fc_w, fc_b;              // qwen2a: [D, n_out], [n_out]
  Weight boi, eoi;                // glma: [n_out] each
};

// Binds the projector's tensors, checking every shape; its output width must be n_embd_out (the
// text model's). Errors: "mmproj: ..." naming the tensor.
Result<AudioProjectorWeights> bind_audio_projector(const GgufFile& file, const AudioHParams& hp,
                                                   int64_t n_embd_out);

// The projector over the encoder's output x [D, n] (contiguous): [n_embd_out, the rows
// AudioHParams::n_output_tokens counts for the chunk].
Tensor build_audio_projector(Graph& g, const AudioHParams& hp, const AudioProjectorWeights& w, Tensor x);

}  // namespace kiln
