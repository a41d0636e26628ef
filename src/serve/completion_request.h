// Turning a completion request's JSON into GenerationRequests: OpenAI's fields (chat and legacy
// completions: sampling, limits, n, logprobs) and llama-server's native /completion fields,
// refusals of fields kiln does not implement (unsupported_fields.h), prompts (text, token ids, or
// both mixed). The chat side (messages, tools, output formats) is chat_request.h. Every bad value
// is a 400 naming the field. Stateless; safe from any thread.
#pragma once

#include <optional>
#include <string>

#include "serve/api_json.h"
#include "serve/engine.h"
#include "serve/server_state.h"

namespace kiln::serve {

// Most choices one request may ask (OpenAI's n).
inline constexpr int64_t kMaxChoices = 16;
// Most alternatives per token: chat top_logprobs, legacy completions logprobs, native n_probs.
inline constexpr int64_t kMaxTopLogprobsChat = 20;
inline constexpr int64_t kMaxLogprobsLegacy = 5;
inline constexpr int64_t kMaxProbsNative = 100;

enum class CompletionApi : uint8_t {
  Chat,         // /v1/chat/completions: logprobs bool, top_logprobs 0..20
  Completions,  // /v1/completions: logprobs integer 0..5
  Native,       // llama-server's /completion: its field names and sampling defaults
};

struct CompletionRequest {
  GenerationRequest gen;
  int32_t n = 1;        // choices, each its own generation
  bool seeded = false;  // a seed was given: choice i samples with seed + i
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage
  bool return_tokens = false;  // native: report the generated token ids
  // Chat: reasoning_control was asked and the template has a reasoning block, so
  // /v1/chat/completions/control may end it (gen.reasoning_budget is set, uncapped if no budget).
  bool reasoning_control = false;
};

// Reads every field but the prompt (sampling, limits, stop, stream, logit_bias, n, logprobs...).
// `tok` resolves logit_bias keys.
std::optional<HttpError> parse_completion_fields(const json& body, const text::Tokenizer& tok,
                                                 CompletionRequest& out,
                                                 CompletionApi api = CompletionApi::Chat);

// A prompt as llama-server takes it: a string, or a list of token ids and strings (a string is
// tokenized with special tokens parsed, BOS added only when it comes first). `field` names it in
// errors. A list of lists (several prompts) is refused, and so is text that cannot fit a slot of
// `n_ctx_slot` tokens, before it is tokenized (check_prompt_text).
std::optional<HttpError> parse_prompt(const json& value, const text::Tokenizer& tok, const char* field,
                                      int32_t n_ctx_slot, std::vector<int32_t>& out);

// A 400 when `text` has too many bytes to fit a slot of `n_ctx_slot` tokens, whatever its tokens
// (Tokenizer::min_tokens): a 10 MB prompt is refused at once instead of after seconds and hundreds
// of MB of tokenizing.
std::optional<HttpError> check_prompt_text(const text::Tokenizer& tok, std::string_view text,
                                           int32_t n_ctx_slot);

// The tokens of a rendered chat: special tokens parsed, BOS added when the vocabulary wants it,
// a doubled BOS (template text + vocabulary) collapsed to one, as llama-server does.
std::vector<int32_t> tokenize_chat(const text::Tokenizer& tok, const std::string& text);

// A 400 when the prompt is empty or does not fit a slot's context.
std::optional<HttpError> check_prompt(const ServerState& st, const std::vector<int32_t>& prompt);

}  // namespace kiln::serve
