// Speculator and SequenceDrafter: the draft sources of speculative decoding, put together as
// llama.cpp's common_speculative does (the reference release's common/speculative.cpp).
//
// A Speculator belongs to one target model: the options, the draft model's context when
// draft-simple is on, and the ngram-mod table (shared by every sequence, as in llama.cpp). Each
// generating sequence has a SequenceDrafter: per step it proposes a draft to follow the
// sequence's history and last sampled token, from the first source (in llama.cpp's order of
// preference: options.h) that has one, cut to the step's budget; after verification it is told
// how many tokens the target accepted. Drafts are only proposals: verification (verify.h) keeps
// the output equal to plain decoding whatever they are.
//
// Use, per sequence and generation:
//   drafter.begin(prompt);                                       // prompt decoded
//   loop: draft = drafter.propose(history, sampled, budget);     // budget: see n_draft_budget()
//         decode [sampled, draft...], verdict = verify_draft(...), drop rejected cells;
//         drafter.accept(verdict.n_accepted());                  // only when draft was not empty
//   drafter.finish(generated tokens);                            // -lcd: counts to keep
// and at the end of the program, speculator.save_lookup_cache().
//
// Ownership: a SequenceDrafter refers to its Speculator, which must outlive it.
// Thread-safety: none; one thread drives a Speculator and its drafters (as the server's step loop).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "llm/speculative/draft_model.h"
#include "llm/speculative/ngram_cache.h"
#include "llm/speculative/ngram_map.h"
#include "llm/speculative/ngram_mod.h"
#include "llm/speculative/options.h"

namespace kiln {

class SequenceDrafter;

class Speculator {
 public:
  // `draft`: the draft model, required by (and only allowed with) draft-simple; its context is
  // made by `make_draft_context` (draft_model.h; placed where the caller's flags say). Errors:
  // options out of range, a missing or unwanted draft model, an incompatible draft model, the
  // maker's.
  static Result<std::unique_ptr<Speculator>> create(const SpeculativeOptions& options, const Model& target,
                                                    std::shared_ptr<const Model> draft,
                                                    const DraftContextMaker& make_draft_context);
  // The same with the draft placed whole on backend.device() (draft_on_backend): its context
  // created with `draft_context`, its weights placed with `draft_weights` (the target's options).
  static Result<std::unique_ptr<Speculator>> create(const SpeculativeOptions& options, const Model& target,
                                                    std::shared_ptr<const Model> draft, Backend& backend,
                                                    const ContextOptions& draft_context,
                                                    const WeightOptions& draft_weights = {}) {
    return create(options, target, std::move(draft), draft_on_backend(backend, draft_context, draft_weights));
  }
  const SpeculativeOptions& options() const { return options_; }
  // The draft model's context (null without draft-simple).
  DraftModel* draft_model() { return draft_.get(); }
  // A drafter for sequence `seq` (0 <= seq < kMaxSequences; its id in the draft context too).
  std::unique_ptr<SequenceDrafter> drafter(int32_t seq);
  // With -lcd: writes the dynamic lookup cache read at create() plus the counts of every
  // generation its drafters finish()ed, replacing the file. Without it, nothing.
  Status save_lookup_cache() const;

 private:
  friend class SequenceDrafter;
  Speculator() = default;
  SpeculativeOptions options_;
  std::unique_ptr<DraftModel> draft_;
  std::optional<NgramModTable> ngram_mod_;
  NgramCounts lookup_static_, lookup_dynamic_;  // -lcs, -lcd as read (empty without them)
  NgramCounts learned_;                         // counts of finished generations, for -lcd
};

// The options of a draft model's context for a target context created with `target`: the same
// sizes, device arena and attention, an F16 cache (llama.cpp's default), token input and logits.
ContextOptions draft_context_options(const ContextOptions& target);

// The most tokens a step may draft for a sequence holding `n_cached` of `n_ctx` cells that has
// generated `n_generated` of at most `n_predict` tokens (-1: no limit), as llama.cpp's server
// (get_n_draft_max): room for the sampled token, the draft and one more cell; the draft plus the
// token after it within the limit. <= 0: no draft.
int32_t n_draft_budget(int64_t n_ctx, int64_t n_cached, int64_t n_predict, int64_t n_generated);

class SequenceDrafter {
 public:
  // The draft-model limits of this sequence (default: the Speculator's options; a request may
  // override them).
  DraftModelLimits limits;

  // A generation starts: `prompt` is what the sequence's cells hold (the draft model decodes it
  // too). Resets the counters. Errors come from the draft model's decode.
  Status begin(std::span<const int32_t> prompt);
  // A draft to follow `history` (the tokens in the sequence's cells, positions 0..) and `sampled`
  // (the token sampled after them, not decoded yet): at most `budget` tokens, empty when no source
  // has one or budget <= 0. Errors come from the draft model's decode.
  Result<std::vector<int32_t>> propose(std::span<const int32_t> history, int32_t sampled, int32_t budget);
  // The target accepted the first n_accepted tokens of the last (non-empty) draft.
  void accept(int32_t n_accepted);
  // The generation ended; `generated`: every token it sampled after the prompt given to begin(),
  // the last one included. With -lcd, the counts of prompt + generated go to the Speculator for
  // save_lookup_cache, counted as llama-lookup counts them (the prompt's n-grams, then each new
  // token's).
  void finish(std::span<const int32_t> generated);

  // Tokens proposed and accepted since begin() (llama-server's timings.draft_n and
  // draft_n_accepted).
  int64_t n_drafted() const { return n_drafted_; }
  int64_t n_accepted() const { return n_accepted_; }

 private:
  friend class Speculator;
  SequenceDrafter(Speculator& owner, int32_t seq);

  Speculator* owner_;  // non-owning
  std::optional<NgramMap> map_k_, map_k4v_;
  std::optional<NgramModDrafter> mod_;
  std::optional<NgramCacheDrafter> cache_;
  std::optional<DraftModelDrafter> model_;
  std::optional<DraftSource> last_source_;  // the source of the last non-empty draft
  std::vector<int32_t> prompt_;               // given to begin(), kept only with -lcd
  int64_t n_drafted_ = 0, n_accepted_ = 0;
};

}  // namespace kiln
