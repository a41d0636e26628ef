#include "llm/speculative/draft_model.h"

#include <algorithm>
#include <cstdlib>

namespace kiln {
namespace {

// ref: llama.cpp common/speculative.cpp SPEC_VOCAB_MAX_SIZE_DIFFERENCE, SPEC_VOCAB_CHECK_START_TOKEN_ID.
constexpr int32_t kMaxVocabDifference = 128;
constexpr int32_t kFirstComparedToken = 5;
constexpr int32_t kDraftTopK = 10;  // the draft's probabilities are over its top 10 tokens

}  // namespace

// ref: llama.cpp common_speculative_are_compatible.
Status check_draft_compatible(const Model& target, const Model& draft) {
  const text::Vocab& t = target.tokenizer().vocab();
  const text::Vocab& d = draft.tokenizer().vocab();
  auto refuse = [&](const auto&... what) {
    return make_error("draft model '", draft.name(), "' cannot draft for '", target.name(), "': ", what...);
  };
  if (t.type() != d.type())
    return refuse("vocabulary types differ (target ", text::vocab_type_name(t.type()), ", draft ",
                  text::vocab_type_name(d.type()), ")");
  auto yes_no = [](bool b) { return b ? "yes" : "no"; };
  if (t.add_bos() != d.add_bos() || (t.add_bos() && t.bos() != d.bos()))
    return refuse("BOS tokens differ (target: added ", yes_no(t.add_bos()), ", id ", t.bos(),
                  "; draft: added ", yes_no(d.add_bos()), ", id ", d.bos(), ")");
  if (t.add_eos() != d.add_eos() || (t.add_eos() && t.eos() != d.eos()))
    return refuse("EOS tokens differ (target: added ", yes_no(t.add_eos()), ", id ", t.eos(),
                  "; draft: added ", yes_no(d.add_eos()), ", id ", d.eos(), ")");
  const int32_t nt = t.n_tokens(), nd = d.n_tokens();
  if (std::abs(nt - nd) > kMaxVocabDifference)
    return refuse("vocabulary sizes ", nt, " (target) and ", nd, " (draft) differ by more than ",
                  kMaxVocabDifference);
  for (int32_t i = kFirstComparedToken; i < std::min(nt, nd); ++i) {
    if (t.token(i).text != d.token(i).text)
      return refuse("token ", i, " is '", t.token(i).text, "' in the target and '", d.token(i).text,
                    "' in the draft");
  }
  return ok_status();
}

DraftContextMaker draft_on_backend(Backend& backend, const ContextOptions& options, const WeightOptions& weights) {
  return [&backend, options, weights](std::shared_ptr<const Model> draft) -> Result<std::unique_ptr<Context>> {
    KILN_ASSIGN_OR_RETURN(auto placed, DeviceWeights::create(std::move(draft), backend.device(), weights));
    return Context::create(std::move(placed), backend, options);
  };
}

Result<std::unique_ptr<DraftModel>> DraftModel::create(std::shared_ptr<const Model> draft, const Model& target,
                                                       const DraftContextMaker& make_context) {
  KILN_TRY(check_draft_compatible(target, *draft));
  std::unique_ptr<DraftModel> m(new DraftModel());
  m->target_vocab_ = target.hparams().n_vocab;
  KILN_ASSIGN_OR_RETURN(m->ctx_, make_context(std::move(draft)));
  return m;
}

DraftModelDrafter::DraftModelDrafter(DraftModel& model, int32_t seq) : model_(&model), seq_(seq) {
  model_->context().seq_rm(seq_, -1, -1);
}

// Keeps the cells of the longest prefix of `text` the draft context holds and decodes the rest;
// with `logits_last`, the last token is decoded again when held (logits are not kept between
// calls) and its logits are row `*last_row` of the context's last decode.
Status DraftModelDrafter::sync(std::span<const int32_t> text, bool logits_last, size_t* last_row) {
  Context& ctx = model_->context();
  size_t keep = 0;
  const size_t limit = logits_last ? text.size() - 1 : text.size();
  while (keep < cached_.size() && keep < limit && cached_[keep] == text[keep]) ++keep;
  if (keep < cached_.size()) {
    ctx.seq_rm(seq_, static_cast<int32_t>(keep), -1);
    cached_.resize(keep);
  }
  Batch batch;
  const auto n_batch = static_cast<size_t>(ctx.n_batch());
  for (size_t begin = keep; begin < text.size(); begin += n_batch) {
    batch.clear();
    const size_t end = std::min(text.size(), begin + n_batch);
    for (size_t i = begin; i < end; ++i)
      batch.add(text[i], static_cast<int32_t>(i), seq_, logits_last && i + 1 == text.size());
    KILN_TRY(ctx.decode(batch));
    cached_.insert(cached_.end(), text.begin() + static_cast<std::ptrdiff_t>(begin),
                   text.begin() + static_cast<std::ptrdiff_t>(end));
  }
  if (last_row != nullptr) *last_row = batch.size() - 1;
  return ok_status();
}

Status DraftModelDrafter::prefill(std::span<const int32_t> history) {
  if (history.empty()) return ok_status();
  return sync(history, false, nullptr);
}

// ref: llama.cpp common_speculative_impl_draft_simple::draft (its draft sampler: top-k 10, then
// the most probable candidate).
Result<std::vector<int32_t>> DraftModelDrafter::draft(std::span<const int32_t> history, int32_t sampled,
                                                      int32_t n_max, const DraftModelLimits& limits) {
  Context& ctx = model_->context();
  text_.assign(history.begin(), history.end());
  text_.push_back(sampled);
  size_t row = 0;
  KILN_TRY(sync(text_, true, &row));
  std::vector<int32_t> out;
  n_max = std::min(n_max, limits.n_max);
  Batch batch;
  while (static_cast<int32_t>(out.size()) < n_max) {
    const std::span<const float> logits = ctx.logits(row);
    candidates_.clear();
    for (size_t i = 0; i < logits.size(); ++i)
      candidates_.push_back({static_cast<int32_t>(i), logits[i], 0.0f});
    sampling::top_k(candidates_, kDraftTopK);
    sampling::softmax(candidates_);
    const Candidate& best = candidates_.front();
    if (best.p < limits.p_min || best.id >= model_->target_vocab()) break;
    out.push_back(best.id);
    if (static_cast<int32_t>(out.size()) >= n_max) break;
    batch.clear();
    batch.add(best.id, static_cast<int32_t>(cached_.size()), seq_, true);
    KILN_TRY(ctx.decode(batch));
    cached_.push_back(best.id);
    row = 0;
  }
  if (static_cast<int32_t>(out.size()) < limits.n_min) out.clear();
  return out;
}

}  // namespace kiln
