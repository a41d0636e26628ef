// JSON shapes of completion responses shared by the routes: usage, llama-server's timings, and
// the three log-probability shapes (OpenAI chat, OpenAI legacy completions, llama-server's
// completion_probabilities). Stateless; safe from any thread.
#pragma once

#include <string>
#include <vector>

#include "serve/api_json.h"
#include "serve/choice_set.h"

namespace kiln::serve {

// OpenAI usage: the prompt counted once, completion tokens summed over the choices, the cached
// prompt tokens of choice 0. Valid once every choice ended.
json usage_json(const ChoiceSet& set);
// llama-server's timings: choice 0's prompt, tokens summed over the choices, the longest choice's
// generation time (the choices run concurrently).
json timings_json(const ChoiceSet& set);

// A string's bytes as a list of integers (OpenAI's "bytes").
json bytes_json(const std::string& s);

// Chat: [{"token", "logprob", "bytes", "top_logprobs": [{"token", "logprob", "bytes"}]}].
json chat_logprobs(const std::vector<TokenOutput>& tokens);
// Legacy completions: {"tokens", "token_logprobs", "top_logprobs": [{piece: logprob}], "text_offset"}.
// `text_offset` counts bytes of the generated text (the prompt is not echoed) and advances.
json legacy_logprobs(const std::vector<TokenOutput>& tokens, size_t& text_offset);
// Native: [{"id", "token", "bytes", "logprob", "top_logprobs": [{"id", "token", "bytes", "logprob"}]}].
json native_probs(const std::vector<TokenOutput>& tokens);

}  // namespace kiln::serve
