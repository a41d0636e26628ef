#include "llm/speculative/step.h"

#include <algorithm>
#include <cstdint>

namespace kiln {

size_t add_verification_rows(Batch& batch, int32_t seq, int32_t pos, int32_t sampled,
                             std::span<const int32_t> draft) {
  const size_t first = batch.size();
  batch.add(sampled, pos, seq, true);
  for (size_t i = 0; i < draft.size(); ++i) batch.add(draft[i], pos + 1 + static_cast<int32_t>(i), seq, true);
  return first;
}

Verdict conclude_verification(Context& ctx, int32_t seq, int32_t pos, size_t first_row,
                              std::span<const int32_t> draft, Sampler& sampler, SequenceDrafter* drafter,
                              const std::function<void(size_t, int32_t)>& on_token) {
  Verdict v = verify_draft(
      sampler, draft, [&](size_t row) { return ctx.logits(first_row + row); }, on_token);
  if (!draft.empty()) {
    ctx.seq_rm(seq, v.first_rejected_pos(pos), -1);
    if (drafter != nullptr) drafter->accept(v.n_accepted());
  }
  return v;
}

Result<Verdict> decode_step(Context& ctx, SequenceState& state, int32_t sampled, Sampler& sampler,
                            SequenceDrafter* drafter, int32_t budget) {
  std::vector<int32_t> draft;
  if (drafter != nullptr) {
    // The sampled token and the draft go in one decode() call.
    budget = std::min<int32_t>(budget, static_cast<int32_t>(std::min<int64_t>(ctx.n_batch(), INT32_MAX)) - 1);
    KILN_ASSIGN_OR_RETURN(draft, drafter->propose(state.tokens, sampled, budget));
  }
  const auto pos = static_cast<int32_t>(state.tokens.size());
  Batch batch;
  const size_t first = add_verification_rows(batch, state.seq, pos, sampled, draft);
  KILN_TRY(ctx.decode(batch, {.single_row_order = !draft.empty()}));
  Verdict v = conclude_verification(ctx, state.seq, pos, first, draft, sampler, drafter);
  state.tokens.push_back(sampled);
  state.tokens.insert(state.tokens.end(), v.tokens.begin(), v.tokens.end() - 1);
  return v;
}

Result<std::vector<int32_t>> generate_tokens(Context& ctx, SequenceState& state, Sampler& sampler,
                                             std::span<const float> logits, int64_t n_gen,
                                             SequenceDrafter* drafter) {
  std::vector<int32_t> out;
  if (n_gen <= 0) return out;
  const auto& tok = ctx.model().tokenizer();
  std::vector<int32_t> next{sampler.sample(logits)};
  sampler.accept(next[0]);
  while (true) {
    for (int32_t t : next) {
      out.push_back(t);
      if (static_cast<int64_t>(out.size()) >= n_gen || tok.is_eog(t)) return out;
    }
    const int32_t budget = n_draft_budget(ctx.n_ctx(), static_cast<int64_t>(state.tokens.size()), n_gen,
                                          static_cast<int64_t>(out.size()));
    KILN_ASSIGN_OR_RETURN(Verdict v, decode_step(ctx, state, next.back(), sampler, drafter, budget));
    next = std::move(v.tokens);
  }
}

}  // namespace kiln
