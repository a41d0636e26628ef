#include "serve/choice_set.h"

#include <algorithm>
#include <random>

#include "llm/model.h"

namespace kiln::serve {

std::variant<std::shared_ptr<ChoiceSet>, HttpError> ChoiceSet::submit(Engine& engine,
                                                                      const GenerationRequest& request,
                                                                      int32_t n, bool seeded) {
  const Model& model = engine.model();
  auto set = std::make_shared<ChoiceSet>();
  set->notifier_ = std::make_shared<Notifier>();
  std::random_device rd;
  for (int32_t i = 0; i < n; ++i) {
    GenerationRequest r = request;
    if (seeded)
      r.sampler.seed += static_cast<uint64_t>(i);
    else if (i > 0)
      r.sampler.seed = rd();
    auto sampler = Sampler::create(r.sampler, engine.n_vocab());
    if (!sampler.ok()) return HttpError{400, sampler.error().message};
    if (r.grammar) {
      auto constraint =
          grammar::GrammarConstraint::create(*r.grammar, model.grammar_vocab(), &model.tokenizer());
      if (!constraint.ok()) return HttpError{400, "the grammar: " + constraint.error().message};
      // The first token's choices, computed here on the client's thread: a grammar that costs
      // more than a token's work budget from the start is refused before it takes a slot (and
      // the engine then finds this answer cached).
      if (i == 0) {
        (*constraint)->allowed();
        if ((*constraint)->failed()) return HttpError{400, (*constraint)->failure()};
      }
      sampler->set_grammar(std::move(*constraint));
    }
    if (r.reasoning_budget)
      sampler->set_reasoning_budget(
          std::make_unique<ReasoningBudget>(*r.reasoning_budget, token_ends_utf8(model.tokenizer())));
    auto gen = engine.submit(std::move(r), std::move(*sampler), set->notifier_);
    if (!gen.ok()) return HttpError{503, gen.error().message};  // ~ChoiceSet cancels the others
    set->gens_.push_back(std::move(*gen));
    set->ended_.push_back(false);
  }
  return set;
}

bool ChoiceSet::poll(std::chrono::milliseconds timeout,
                     const std::function<void(size_t, Generation::Chunk&)>& on_chunk) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    const uint64_t seen = notifier_->version();
    bool any = false;
    for (size_t i = 0; i < gens_.size(); ++i) {
      if (ended_[i]) continue;
      Generation::Chunk c = gens_[i]->take();
      if (c.empty()) continue;
      any = true;
      ended_[i] = c.final;
      on_chunk(i, c);
    }
    if (any || all_done()) return all_done();
    const auto now = std::chrono::steady_clock::now();
    if (now >= deadline) return false;
    notifier_->wait(seen, std::chrono::duration_cast<std::chrono::milliseconds>(deadline - now) +
                              std::chrono::milliseconds(1));
  }
}

void ChoiceSet::cancel() {
  for (auto& g : gens_) g->cancel();
}

void ChoiceSet::end_reasoning() {
  for (auto& g : gens_) g->end_reasoning();
}

bool ChoiceSet::live() const {
  return std::any_of(gens_.begin(), gens_.end(), [](const auto& g) { return !g->ended(); });
}

bool ChoiceSet::all_done() const {
  for (bool e : ended_)
    if (!e) return false;
  return true;
}

std::string ChoiceSet::error() const {
  for (size_t i = 0; i < gens_.size(); ++i)
    if (ended_[i] && !gens_[i]->error().empty()) return gens_[i]->error();
  return {};
}

int ChoiceSet::error_status() const {
  for (size_t i = 0; i < gens_.size(); ++i)
    if (ended_[i] && !gens_[i]->error().empty())
      return gens_[i]->shut_down() ? 503 : gens_[i]->request_error() ? 400 : 500;
  return 500;
}

}  // namespace kiln::serve
