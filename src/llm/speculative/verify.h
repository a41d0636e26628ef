// Verification of a draft by the target model (llama.cpp's common_sampler_sample_and_accept_n).
//
// The target decodes the sequence's last sampled token followed by the draft in one batch, every
// row with logits, rows in the single-row float order (DecodeOptions::single_row_order). Row i's
// logits are those of the token after draft[i - 1] (row 0: after the sampled token). The target's
// own sampler samples row 0, 1, ... in turn, exactly as it samples one token per decode without
// speculation (same stages, same random stream, each token accepted into its history before the
// next row); the first token that differs from the draft ends the verification. So the tokens
// produced are the ones plain decoding produces, and each draws one number from the sampler's
// random stream, as it would there.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "llm/sampler.h"

namespace kiln {

struct Verdict {
  // The accepted draft tokens, then the target's own next token (never empty).
  std::vector<int32_t> tokens;

  int32_t n_accepted() const { return static_cast<int32_t>(tokens.size()) - 1; }
  // With the sampled token at position `pos_sampled` and the draft after it, the sequence's KV
  // cells at positions >= this hold rejected draft tokens (remove them: Context::seq_rm(seq,
  // first_rejected_pos(...), -1)). The new token (tokens.back()) is in no cell yet.
  int32_t first_rejected_pos(int32_t pos_sampled) const { return pos_sampled + 1 + n_accepted(); }
};

// `row_logits(i)`: the target's logits [n_vocab] of verification row i, 0 <= i <= draft.size().
// `on_token(i, token)`, when given, runs after row i was sampled and accepted into the sampler
// (e.g. to read sampler.last_candidates() for logprobs).
Verdict verify_draft(Sampler& sampler, std::span<const int32_t> draft,
                     const std::function<std::span<const float>(size_t)>& row_logits,
                     const std::function<void(size_t, int32_t)>& on_token = {});

}  // namespace kiln
