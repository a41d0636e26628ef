// A prompt to CLIP input ids and per-token emphasis weights, as stable-diffusion.cpp's
// FrozenCLIPEmbedderWithCustomWords::tokenize(text, 77, 77, true) makes them for SD 1.x, 2.x and
// XL: the emphasis pieces are tokenized one by one; BREAK pads the tokens so far with EOS (weight 1)
// to a multiple of 75; the tokens are cut into chunks of 75, each becoming BOS + tokens + EOS
// padded to 77 with the pad id (weight 1 for BOS, EOS and padding). An empty prompt is one chunk.
// Thread-safety: pure function (the tokenizer is immutable).
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "core/result.h"
#include "diffusion/clip_tokenizer.h"
#include "diffusion/model_family.h"

namespace kiln::diffusion {

inline constexpr size_t kClipChunkTokens = 77;

struct ClipPromptTokens {
  std::vector<int32_t> ids;    // a multiple of kClipChunkTokens, >= 1 chunk
  std::vector<float> weights;  // one per id
};

// The pad id: 0 for SD 2.x (OpenCLIP-H), EOS for SD 1.x and SDXL (both of its encoders).
int32_t clip_pad_id(ModelFamily family);

// Errors: those of parse_prompt_attention.
Result<ClipPromptTokens> tokenize_prompt(const ClipTokenizer& tokenizer, std::string_view prompt,
                                         int32_t pad_id);

}  // namespace kiln::diffusion
