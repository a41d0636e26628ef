// Speculative decoding steps over a target Context.
//
// The parts a step loop over many sequences uses (the server: every slot's rows in the step's one
// batch): SequenceDrafter::propose, then add_verification_rows for each sequence, one decode()
// with single_row_order when any row is a draft, then conclude_verification for each sequence.
// decode_step does the same for one sequence alone (`kiln run`, `kiln bench`, the tests).
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "llm/context.h"
#include "llm/sampler.h"
#include "llm/speculative/speculator.h"
#include "llm/speculative/verify.h"

namespace kiln {

// Adds the verification rows of sequence `seq` to `batch`: `sampled` (the token sampled after the
// sequence's cells) at position `pos`, then the draft at pos + 1.., every row with logits. Returns
// the batch index of the first row (row i is batch index first + i).
size_t add_verification_rows(Batch& batch, int32_t seq, int32_t pos, int32_t sampled,
                             std::span<const int32_t> draft);

// After the batch holding those rows was decoded: verifies `draft` with the sequence's `sampler`
// on rows first_row.. (verify_draft), removes the cells of the rejected draft tokens from `seq`
// (positions from verdict.first_rejected_pos(pos)) and tells `drafter` how many tokens were
// accepted (when the draft is not empty). `on_token`: as verify_draft's.
Verdict conclude_verification(Context& ctx, int32_t seq, int32_t pos, size_t first_row,
                              std::span<const int32_t> draft, Sampler& sampler, SequenceDrafter* drafter,
                              const std::function<void(size_t, int32_t)>& on_token = {});

struct SequenceState {
  int32_t seq = 0;
  std::vector<int32_t> tokens;  // the tokens in the sequence's cells, at positions 0..size()-1
};

// Decodes `sampled` (the token sampled after state.tokens) followed by a draft from `drafter`
// (none when it is null or budget <= 0; at most n_batch - 1 tokens) in one batch, verifies the
// draft with `sampler`, removes the rejected tail's cells and appends `sampled` and the accepted
// tokens to state.tokens. The verdict's tokens are the next tokens of the sequence (the last one
// not decoded yet). Without a draft this is plain decoding: one token decoded, one sampled.
Result<Verdict> decode_step(Context& ctx, SequenceState& state, int32_t sampled, Sampler& sampler,
                            SequenceDrafter* drafter, int32_t budget);

// Samples a token from `logits` (of state's last token), then decode_step()s with budgets from
// n_draft_budget() until n_gen tokens were sampled or one is an end-of-generation token (kept as
// the last); returns them. The last token is not decoded. For benchmarks and tests (`kiln run`
// streams and shifts the context in its own loop).
Result<std::vector<int32_t>> generate_tokens(Context& ctx, SequenceState& state, Sampler& sampler,
                                             std::span<const float> logits, int64_t n_gen,
                                             SequenceDrafter* drafter);

}  // namespace kiln
