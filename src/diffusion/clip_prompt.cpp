#include "diffusion/clip_prompt.h"

#include <algorithm>

#include "diffusion/prompt_attention.h"

namespace kiln::diffusion {
namespace {

constexpr size_t kChunkBody = kClipChunkTokens - 2;  // room for BOS and EOS

}  // namespace

int32_t clip_pad_id(ModelFamily family) { return family == ModelFamily::Sd2 ? 0 : ClipTokenizer::kEosId; }

Result<ClipPromptTokens> tokenize_prompt(const ClipTokenizer& tokenizer, std::string_view prompt,
                                         int32_t pad_id) {
  KILN_ASSIGN_OR_RETURN(const std::vector<WeightedText> pieces, parse_prompt_attention(prompt));
  std::vector<int32_t> tokens;
  std::vector<float> token_weights;
  for (const WeightedText& piece : pieces) {
    if (piece.text == "BREAK" && piece.weight == kBreakWeight) {
      const size_t padding = (kChunkBody - tokens.size() % kChunkBody) % kChunkBody;
      tokens.insert(tokens.end(), padding, ClipTokenizer::kEosId);
      token_weights.insert(token_weights.end(), padding, 1.0f);
      continue;
    }
    const std::vector<int32_t> ids = tokenizer.encode(piece.text);
    tokens.insert(tokens.end(), ids.begin(), ids.end());
    token_weights.insert(token_weights.end(), ids.size(), piece.weight);
  }

  ClipPromptTokens out;
  auto add_chunk = [&](size_t begin, size_t count) {
    out.ids.push_back(ClipTokenizer::kBosId);
    out.weights.push_back(1.0f);
    out.ids.insert(out.ids.end(), tokens.begin() + begin, tokens.begin() + begin + count);
    out.weights.insert(out.weights.end(), token_weights.begin() + begin,
                       token_weights.begin() + begin + count);
    out.ids.push_back(ClipTokenizer::kEosId);
    out.weights.push_back(1.0f);
    const size_t padding = kClipChunkTokens - 2 - count;
    out.ids.insert(out.ids.end(), padding, pad_id);
    out.weights.insert(out.weights.end(), padding, 1.0f);
  };
  if (tokens.size() <= kChunkBody) {
    add_chunk(0, tokens.size());
    return out;
  }
  for (size_t offset = 0; offset < tokens.size(); offset += kChunkBody) {
    add_chunk(offset, std::min(kChunkBody, tokens.size() - offset));
  }
  return out;
}

}  // namespace kiln::diffusion
