#include "llm/generation.h"

#include <algorithm>

#include "core/check.h"

namespace kiln {

Result<size_t> decode_tokens(Context& ctx, std::span<const int32_t> tokens, SequenceState& cached,
                             int64_t n_batch) {
  KILN_ASSERT(!tokens.empty() && n_batch > 0, "decode_tokens: no tokens, or n_batch < 1");
  Batch batch;
  for (size_t begin = 0; begin < tokens.size(); begin += static_cast<size_t>(n_batch)) {
    const size_t end = std::min(tokens.size(), begin + static_cast<size_t>(n_batch));
    batch.clear();
    for (size_t i = begin; i < end; ++i) {
      batch.add(tokens[i], static_cast<int32_t>(cached.tokens.size() + (i - begin)), cached.seq,
                i + 1 == tokens.size());
    }
    KILN_TRY(ctx.decode(batch));
    cached.tokens.insert(cached.tokens.end(), tokens.begin() + static_cast<std::ptrdiff_t>(begin),
                         tokens.begin() + static_cast<std::ptrdiff_t>(end));
  }
  return batch.size() - 1;
}

Result<GenerateResult> generate(Context& ctx, Sampler& sampler, std::span<const float> logits,
                                SequenceState& cached, const GenerateOptions& options, OnPiece on_piece) {
  const auto& tok = ctx.model().tokenizer();
  const int64_t n_ctx = ctx.n_ctx();
  GenerateResult r;
  auto done = [&](StopReason why) {
    r.stop = why;
    return r;
  };
  if (options.n_predict == 0) return done(StopReason::Length);
  // The tokens sampled by the last step, in order: one, or accepted draft tokens and one more.
  std::vector<int32_t> next{sampler.sample(logits)};
  sampler.accept(next[0]);
  while (true) {
    for (size_t i = 0; i < next.size(); ++i) {
      const int32_t id = next[i];
      if (options.interrupted != nullptr && *options.interrupted != 0) return done(StopReason::Interrupted);
      if (tok.is_eog(id)) return done(StopReason::EndOfGeneration);
      const auto piece = tok.token_to_piece(id, options.show_special);
      const std::string_view text = piece.ok() ? std::string_view(*piece) : std::string_view();
      r.text += text;
      ++r.n_generated;
      r.tokens.push_back(id);
      if (!on_piece(id, text)) return done(StopReason::Stopped);
      if (options.n_predict >= 0 && r.n_generated >= options.n_predict) return done(StopReason::Length);
      // The sequence before `id`: the cells hold the accepted draft tokens after it already.
      const std::span<const int32_t> earlier =
          std::span<const int32_t>(cached.tokens).first(cached.tokens.size() - (next.size() - 1 - i));
      if (options.reverse_prompts != nullptr && options.reverse_prompts->found(earlier, id))
        return done(StopReason::ReversePrompt);
    }
    auto n_past = static_cast<int64_t>(cached.tokens.size());
    if (n_past >= n_ctx) {
      if (!options.context_shift) return done(StopReason::ContextFull);
      // ref: llama.cpp's context shift: keep n_keep tokens, drop half of the rest, slide the remainder.
      const int64_t n_keep = std::clamp<int64_t>(options.n_keep, 0, n_past);
      const int64_t n_discard = (n_past - n_keep) / 2;
      ctx.seq_rm(cached.seq, static_cast<int32_t>(n_keep), static_cast<int32_t>(n_keep + n_discard));
      KILN_TRY(ctx.seq_add(cached.seq, static_cast<int32_t>(n_keep + n_discard), static_cast<int32_t>(n_past),
                           static_cast<int32_t>(-n_discard)));
      cached.tokens.erase(cached.tokens.begin() + n_keep, cached.tokens.begin() + n_keep + n_discard);
      n_past = static_cast<int64_t>(cached.tokens.size());
    }
    const int32_t budget = n_draft_budget(n_ctx, n_past, options.n_predict, r.n_generated);
    KILN_ASSIGN_OR_RETURN(Verdict v, decode_step(ctx, cached, next.back(), sampler, options.drafter, budget));
    next = std::move(v.tokens);
  }
}

}  // namespace kiln
