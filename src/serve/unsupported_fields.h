// Request fields that would change the output and that kiln does not implement yet. Every
// generation route (chat, completions, llama-server's /completion) refuses each of them with a
// 400 naming it, unless it holds its neutral value (what clients send when they do not use the
// feature: null, false, 0, an empty list...). One list for every route (unsupported_fields.cpp):
// implementing a feature removes its entry there.
// Fields that do not change the output (user, metadata, store, parallel_tool_calls, ...) are not
// listed: they are accepted and ignored.
#pragma once

#include <optional>

#include "serve/api_json.h"
#include "serve/completion_request.h"

namespace kiln::serve {

// `api`: the route the request came through (a few fields are only missing on some routes).
std::optional<HttpError> refuse_unsupported_fields(const json& body, CompletionApi api);

}  // namespace kiln::serve
