// Hyperparameters of a vision encoder in llama.cpp's mmproj GGUF ("clip" architecture), read
// with llama.cpp's key names (clip.vision.*) and defaults. The projector type (clip.projector_type)
// is kept as a name: models/clip/projector.h turns it into a Projector or refuses it.
#pragma once

#include <array>
#include <cstdint>
#include <string>

#include "core/gguf.h"
#include "core/result.h"

namespace kiln {

// The activation of the ViT blocks' feed-forward layers (clip.use_gelu / clip.use_silu).
// GeluErf: the exact GELU, which the Whisper audio encoder uses (FFN_GELU_ERF).
enum class ClipFfnAct : uint8_t { Gelu, GeluQuick, Silu, GeluErf };

struct ClipHParams {
  std::string projector;     // clip.projector_type ("gemma3", "mlp", ...)
  int64_t image_size = 0;    // clip.vision.image_size: the side of the square the encoder takes
  int64_t patch_size = 0;    // clip.vision.patch_size
  int64_t n_embd = 0;        // clip.vision.embedding_length
  int64_t n_ff = 0;          // clip.vision.feed_forward_length
  int64_t n_layer = 0;       // clip.vision.block_count
  int64_t n_head = 0;        // clip.vision.attention.head_count
  int64_t n_head_kv = 0;     // clip.vision.attention.head_count_kv, default n_head
  int64_t head_dim = 0;      // clip.vision.attention.head_dim... default n_embd / n_head
  int64_t projection_dim = 0;  // clip.vision.projection_dim (informative; the projector's weights decide)
  float eps = 1e-6f;         // clip.vision.attention.layer_norm_epsilon
  std::array<float, 3> image_mean{};  // clip.vision.image_mean: per RGB channel
  std::array<float, 3> image_std{};   // clip.vision.image_std
  ClipFfnAct ffn_act = ClipFfnAct::GeluQuick;
  // clip.vision.projector.scale_factor when present (0 when absent: the projector's default).
  int64_t scale_factor = 0;

  // Patches along each side of an image_size square (the patch convolution drops a remainder).
  int64_t patches_per_side() const { return image_size / patch_size; }
};

// Reads and validates the vision hyperparameters: the file must say it has a vision encoder
// (audio-only mmproj files are refused), sizes must be positive and bounded, heads must divide the
// width, mean and std must have 3 values (std non-zero). Errors name the key: "mmproj: ...".
Result<ClipHParams> read_clip_hparams(const GgufFile& file);

}  // namespace kiln
