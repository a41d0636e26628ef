#include "llm/speculative/speculator.h"

#include <algorithm>
#include <filesystem>

#include "llm/kv_cache.h"
#include "llm/speculative/ngram_simple.h"

namespace kiln {

Result<std::unique_ptr<Speculator>> Speculator::create(const SpeculativeOptions& options, const Model& target,
                                                       std::shared_ptr<const Model> draft,
                                                       const DraftContextMaker& make_draft_context) {
  KILN_TRY(options.validate());
  const bool wants_model = options.uses(DraftSource::DraftSimple);
  if (wants_model && !draft)
    return make_error("speculative type draft-simple needs a draft model (-md FILE)");
  if (!wants_model && draft) {
    std::string types;
    for (DraftSource src : options.sources) {
      if (!types.empty()) types += ',';
      types += draft_source_name(src);
    }
    return make_error("a draft model is given but the speculative types (", types.empty() ? "none" : types,
                      ") do not include draft-simple");
  }
  std::unique_ptr<Speculator> s(new Speculator());
  s->options_ = options;
  if (wants_model) {
    KILN_ASSIGN_OR_RETURN(
        s->draft_, DraftModel::create(std::move(draft), target, make_draft_context));
  }
  if (options.uses(DraftSource::NgramMod)) s->ngram_mod_.emplace(options.ngram_mod.n_match);
  const int32_t n_vocab = target.hparams().n_vocab;
  if (!options.lookup_cache_static.empty()) {
    auto counts = NgramCounts::load(options.lookup_cache_static, n_vocab);
    if (!counts.ok()) return make_error("-lcs ", counts.error().message);
    s->lookup_static_ = std::move(*counts);
  }
  // A dynamic cache that does not exist yet starts empty (its first run writes it).
  if (!options.lookup_cache_dynamic.empty() && std::filesystem::exists(options.lookup_cache_dynamic)) {
    auto counts = NgramCounts::load(options.lookup_cache_dynamic, n_vocab);
    if (!counts.ok()) return make_error("-lcd ", counts.error().message);
    s->lookup_dynamic_ = std::move(*counts);
  }
  return s;
}

// ref: llama.cpp examples/lookup: the dynamic cache merged with the generations' counts, saved.
Status Speculator::save_lookup_cache() const {
  if (options_.lookup_cache_dynamic.empty()) return ok_status();
  NgramCounts all = lookup_dynamic_;
  all.merge(learned_);
  Status saved = all.save(options_.lookup_cache_dynamic);
  if (!saved.ok()) return make_error("-lcd ", saved.error().message);
  return ok_status();
}

std::unique_ptr<SequenceDrafter> Speculator::drafter(int32_t seq) {
  KILN_ASSERT(seq >= 0 && seq < kMaxSequences, "speculator: sequence id out of range");
  return std::unique_ptr<SequenceDrafter>(new SequenceDrafter(*this, seq));
}

ContextOptions draft_context_options(const ContextOptions& target) {
  ContextOptions o = target;
  o.type_k = o.type_v = ContextOptions{}.type_k;
  o.embeddings = false;
  o.input_embeddings = false;
  return o;
}

int32_t n_draft_budget(int64_t n_ctx, int64_t n_cached, int64_t n_predict, int64_t n_generated) {
  int64_t budget = n_ctx - n_cached - 2;
  if (n_predict >= 0) budget = std::min(budget, n_predict - n_generated - 1);
  return static_cast<int32_t>(std::clamp<int64_t>(budget, -1, INT32_MAX));
}

SequenceDrafter::SequenceDrafter(Speculator& owner, int32_t seq)
    : limits(owner.options().draft), owner_(&owner) {
  const SpeculativeOptions& o = owner.options();
  if (o.uses(DraftSource::NgramMapK))
    map_k_.emplace(o.ngram_map_k.size_n, o.ngram_map_k.size_m, true, o.ngram_map_k.min_hits);
  if (o.uses(DraftSource::NgramMapK4v))
    map_k4v_.emplace(o.ngram_map_k4v.size_n, o.ngram_map_k4v.size_m, false, o.ngram_map_k4v.min_hits);
  if (o.uses(DraftSource::NgramMod)) mod_.emplace(*owner.ngram_mod_, o.ngram_mod);
  if (o.uses(DraftSource::NgramCache)) cache_.emplace(&owner.lookup_dynamic_, &owner.lookup_static_);
  if (owner.draft_) model_.emplace(*owner.draft_, seq);
}

// ref: llama.cpp common_speculative_begin (and a fresh ngram-cache per generation: llama.cpp's
// server keeps a slot's counts from earlier requests).
Status SequenceDrafter::begin(std::span<const int32_t> prompt) {
  if (map_k_) map_k_->begin(prompt);
  if (map_k4v_) map_k4v_->begin(prompt);
  if (mod_) mod_->begin(prompt);
  if (cache_) cache_.emplace(&owner_->lookup_dynamic_, &owner_->lookup_static_);
  last_source_.reset();
  if (cache_ && !owner_->options().lookup_cache_dynamic.empty()) prompt_.assign(prompt.begin(), prompt.end());
  n_drafted_ = n_accepted_ = 0;
  return model_ ? model_->prefill(prompt) : ok_status();
}

// ref: llama.cpp common_speculative_draft: the sources in order until one drafts; its draft is
// cut to the budget afterwards (the source's own statistics see the uncut draft).
Result<std::vector<int32_t>> SequenceDrafter::propose(std::span<const int32_t> history, int32_t sampled,
                                                      int32_t budget) {
  std::vector<int32_t> draft;
  if (budget <= 0) return draft;
  const SpeculativeOptions& o = owner_->options();
  for (DraftSource source : o.sources) {
    switch (source) {
      case DraftSource::NgramSimple:
        draft = ngram_simple_draft(o.ngram_simple.size_n, o.ngram_simple.size_m, history, sampled);
        break;
      case DraftSource::NgramMapK:
        map_k_->draft(history, sampled, draft);
        break;
      case DraftSource::NgramMapK4v:
        map_k4v_->draft(history, sampled, draft);
        break;
      case DraftSource::NgramMod:
        draft = mod_->draft(history, sampled);
        break;
      case DraftSource::NgramCache:
        draft = cache_->draft(history, sampled);
        break;
      case DraftSource::DraftSimple: {
        KILN_ASSIGN_OR_RETURN(draft, model_->draft(history, sampled, budget, limits));
        break;
      }
    }
    if (!draft.empty()) {
      if (static_cast<int32_t>(draft.size()) > budget) draft.resize(static_cast<size_t>(budget));
      last_source_ = source;
      n_drafted_ += static_cast<int64_t>(draft.size());
      break;
    }
  }
  return draft;
}

// ref: llama.cpp examples/lookup/lookup.cpp: the context cache counts the prompt, then every token
// as it is accepted; at the end it is merged into the dynamic cache.
void SequenceDrafter::finish(std::span<const int32_t> generated) {
  if (!cache_ || owner_->options().lookup_cache_dynamic.empty()) return;
  NgramCounts counts;
  std::vector<int32_t> text = prompt_;
  counts.add(text, 1, NgramCounts::kMaxNgram, text.size());
  for (int32_t t : generated) {
    text.push_back(t);
    counts.add(text, 1, NgramCounts::kMaxNgram, 1);
  }
  // The first generation's counts are kept as they are (their order is llama-lookup's file order).
  if (owner_->learned_.size() == 0) {
    owner_->learned_ = std::move(counts);
  } else {
    owner_->learned_.merge(counts);
  }
}

// ref: llama.cpp common_speculative_accept: only the source that drafted learns the outcome.
void SequenceDrafter::accept(int32_t n_accepted) {
  n_accepted_ += n_accepted;
  if (!last_source_) return;
  switch (*last_source_) {
    case DraftSource::NgramMapK:
      map_k_->accept(n_accepted);
      break;
    case DraftSource::NgramMapK4v:
      map_k4v_->accept(n_accepted);
      break;
    case DraftSource::NgramMod:
      mod_->accept(n_accepted);
      break;
    default:
      break;
  }
}

}  // namespace kiln
