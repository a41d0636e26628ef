// draft-simple: a small model of the target's vocabulary drafts greedily (llama.cpp's
// common_speculative_impl_draft_simple).
//
// DraftModel owns the draft model's Context: a second owner of device memory beside the target's
// (its weights, KV cache and compute arena), created like the target's. Sequence s of the target
// drafts in sequence s of this context. DraftModelDrafter is one sequence's drafting: it keeps
// the draft's cells equal to a prefix of the sequence's history, decoding what they lack before
// each draft and dropping what the target rejected (so a draft costs the new tokens only).
//
// A draft token is the draft model's most likely token; drafting stops at n_max tokens, at a
// token whose probability among the draft's top 10 is below p_min, or at a token the target's
// vocabulary lacks (vocabularies may differ by up to 128 entries); a draft shorter than n_min is
// dropped.
// Not thread-safe: the caller serializes drafting with its other uses of the contexts.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <vector>

#include "llm/context.h"
#include "llm/model.h"
#include "llm/sampler.h"
#include "llm/speculative/options.h"

namespace kiln {

// llama.cpp's rule for drafting for `target` with `draft`: same vocabulary type, same BOS and EOS
// use and ids, vocabulary sizes within 128, equal token texts (ids 5 and up). The error says what
// differs.
Status check_draft_compatible(const Model& target, const Model& draft);

// Places a draft model and creates its context (where it goes is the caller's: one device, or a
// split as llm/model_placement.h's place_draft_context makes). Called once, after the
// compatibility check, so an incompatible draft allocates nothing.
using DraftContextMaker = std::function<Result<std::unique_ptr<Context>>(std::shared_ptr<const Model> draft)>;

// The maker that places the draft whole on backend.device() with `weights` and creates its context
// with `options` on `backend` (which must outlive the context).
DraftContextMaker draft_on_backend(Backend& backend, const ContextOptions& options, const WeightOptions& weights = {});

class DraftModel {
 public:
  // Checks compatibility, then creates the draft's context with `make_context`.
  static Result<std::unique_ptr<DraftModel>> create(std::shared_ptr<const Model> draft, const Model& target,
                                                    const DraftContextMaker& make_context);
  Context& context() { return *ctx_; }
  const Model& model() const { return ctx_->model(); }
  int64_t target_vocab() const { return target_vocab_; }

 private:
  DraftModel() = default;
  std::unique_ptr<Context> ctx_;
  int64_t target_vocab_ = 0;
};

class DraftModelDrafter {
 public:
  // Empties the sequence's cells of the draft context (what an earlier drafter left there).
  DraftModelDrafter(DraftModel& model, int32_t seq);

  // The draft after `history` (the target sequence's tokens, at positions 0..) + `sampled`, at
  // most n_max tokens (n_max >= 1). Errors come from the draft context's decode.
  Result<std::vector<int32_t>> draft(std::span<const int32_t> history, int32_t sampled, int32_t n_max,
                                     const DraftModelLimits& limits);
  // Decodes `history` (the prompt) into the sequence's cells ahead of the first draft.
  Status prefill(std::span<const int32_t> history);

 private:
  Status sync(std::span<const int32_t> text, bool logits_last, size_t* last_row);

  DraftModel* model_;  // non-owning; shared by every sequence's drafter
  int32_t seq_;
  std::vector<int32_t> cached_;  // the tokens in the sequence's cells of the draft context
  std::vector<int32_t> text_;    // scratch: history + sampled
  std::vector<Candidate> candidates_;
};

}  // namespace kiln
