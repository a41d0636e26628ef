// Non-streaming answers to generation requests: the handler waits for every choice to end, then
// answers with the body built from their output (200), or with the error (503 when the server is
// shutting down, else 500). A client that leaves meanwhile (its connection closes: the HTTP layer
// sees it at once) cancels every choice and frees their slots.
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include "serve/api_json.h"
#include "serve/choice_set.h"

namespace kiln::serve {

// How long a handler waits on its choices before looking again (a stream's keep-going check, and
// the upper bound on noticing an output without its notification).
inline constexpr std::chrono::milliseconds kPollInterval{1000};

// Builds the JSON body from the choices' gathered output once every choice ended without error.
using BodyBuilder = std::function<json(const ChoiceSet&, std::vector<ChoiceOutput>&)>;
// The same for an answer that is not JSON (a transcription as plain text).
using ResponseBuilder = std::function<http::Response(const ChoiceSet&, std::vector<ChoiceOutput>&)>;

// Answers `ex` with build(...) when `set` ends; cancels `set` when the client goes. Blocks.
void respond_when_done(http::Exchange& ex, const std::shared_ptr<ChoiceSet>& set, const BodyBuilder& build);
void respond_when_done(http::Exchange& ex, const std::shared_ptr<ChoiceSet>& set, const ResponseBuilder& build);

}  // namespace kiln::serve
