#include "serve/queue_completion.h"

namespace kiln::serve {

std::shared_ptr<ChoiceSet> queue_completion(const RouteContext& rc, ServerState& st, CompletionRequest& p,
                                            std::optional<MemoryGate::Lease>& admission, http::Exchange& ex) {
  std::optional<HttpError> error = check_prompt(st, p.gen.prompt);
  std::shared_ptr<ChoiceSet> set;
  if (!error) {
    if (p.gen.grammar) p.gen.grammar->work_limit = rc.options.grammar_work_limit;
    auto submitted = ChoiceSet::submit(*st.engine, p.gen, p.n, p.seeded);
    if (auto* e = std::get_if<HttpError>(&submitted))
      error = std::move(*e);
    else
      set = std::get<std::shared_ptr<ChoiceSet>>(std::move(submitted));
  }
  admission.reset();
  if (error) send_error(ex, *error);
  return set;
}

}  // namespace kiln::serve
