// One generation step of a single sequence, with or without speculation: what `kiln run`,
// `kiln bench` and the tests share (the server puts many sequences' rows in one batch instead,
// from the same parts: SequenceDrafter::propose, verify_draft, Verdict::first_rejected_pos).
#pragma once

#include <cstdint>
#include <vector>

#include "llm/context.h"
#include "llm/sampler.h"
#include "llm/speculative/speculator.h"
#include "llm/speculative/verify.h"

namespace kiln {

struct SequenceState {
  int32_t seq = 0;
  std::vector<int32_t> tokens;  // the tokens in the sequence's cells, at positions 0..size()-1
};

// Decodes `sampled` (the token sampled after state.tokens) followed by a draft from `drafter`
// (none when it is null or budget <= 0; at most n_batch - 1 tokens) in one batch, verifies the draft with `sampler`, removes
// the rejected tail's cells and appends `sampled` and the accepted tokens to state.tokens. The
// verdict's tokens are the next tokens of the sequence (the last one not decoded yet). Without a
// draft this is plain decoding: one token decoded, one sampled.
Result<Verdict> decode_step(Context& ctx, SequenceState& state, int32_t sampled, Sampler& sampler,
                            SequenceDrafter* drafter, int32_t budget);

// Samples a token from `logits` (of state's last token), then decode_step()s with budgets from
// n_draft_budget() until n_gen tokens were sampled or one is an end-of-generation token (kept as
// the last); returns them. The last token is not decoded. For benchmarks and tests (`kiln run`
// streams and shifts the context in its own loop).
Result<std::vector<int32_t>> generate_tokens(Context& ctx, SequenceState& state, Sampler& sampler,
                                             std::span<const float> logits, int64_t n_gen, SequenceDrafter* drafter);

}  // namespace kiln
