// The last step of every generating route (/v1/chat/completions, /v1/completions, /completion,
// /v1/audio/transcriptions): a parsed request queued on the model's engine.
#pragma once

#include <memory>
#include <optional>

#include "serve/choice_set.h"
#include "serve/completion_request.h"
#include "serve/memory_gate.h"
#include "serve/server_state.h"

namespace kiln::serve {

// Queues `p` on `st`'s engine as p.n choices (ChoiceSet::submit): its prompt checked against a slot
// (check_prompt), its grammar given the server's work limit (ServerOptions::grammar_work_limit),
// then `admission` (the request's hold on the pre-queue memory, RouteContext::admit) dropped, queued
// or not. Null after answering the error: 400 for the prompt or the grammar, 503 when the engine is
// busy or stopping. Any request thread.
std::shared_ptr<ChoiceSet> queue_completion(const RouteContext& rc, ServerState& st, CompletionRequest& p,
                                            std::optional<MemoryGate::Lease>& admission, http::Exchange& ex);

}  // namespace kiln::serve
