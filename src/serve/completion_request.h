// Turning a completion request's JSON into a GenerationRequest: the OpenAI sampling and limit
// fields, refusals of fields kiln does not implement, the chat prompt through the model's template.
#pragma once

#include <optional>
#include <string>

#include "serve/api_json.h"
#include "serve/engine.h"
#include "serve/server_state.h"

namespace kiln::serve {

struct CompletionRequest {
  GenerationRequest gen;
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage
};

// Reads every field but the prompt (sampling, max_tokens, stop, stream, logit_bias, ...).
std::optional<HttpError> parse_completion_fields(const json& body, const Model& model, CompletionRequest& out);

// Renders body["messages"] with the state's chat template (generation prompt added) into `text`.
std::optional<HttpError> render_chat(const ServerState& st, const json& body, std::string& text);

// The tokens of a rendered chat: special tokens parsed, BOS added when the vocabulary wants it,
// a doubled BOS (template text + vocabulary) collapsed to one, as llama-server does.
std::vector<int32_t> tokenize_chat(const text::Tokenizer& tok, const std::string& text);

// A 400 when the prompt is empty or does not fit a slot's context.
std::optional<HttpError> check_prompt(const ServerState& st, const std::vector<int32_t>& prompt);

json usage_json(const Generation& g);

}  // namespace kiln::serve
