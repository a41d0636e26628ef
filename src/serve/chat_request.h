// The chat side of a completion request: messages, tools, tool_choice, parallel_tool_calls, the
// output format (grammar, json_schema, response_format), chat_template_kwargs,
// add_generation_prompt and continue_final_message (a final assistant message continued: its text
// ends the prompt, its turn left open, as llama-server's prefill) turned into a chat::ChatPlan
// (prompt, grammar, output parser options) and applied to the GenerationRequest. Message content
// null is empty text (kept null beside tool_calls). Every bad value is a 400 naming the field.
// Stateless; safe from any thread.
#pragma once

#include <optional>
#include <string>

#include "serve/api_json.h"
#include "serve/completion_request.h"
#include "serve/server_state.h"
#include "text/chat/chat_plan.h"

namespace kiln::serve {

// What a request asks of its output's shape: "grammar" (GBNF), "json_schema", or
// "response_format" ({"type": "text" | "json_object" | "json_schema"}); at most one of them.
struct OutputFormat {
  std::string grammar;
  std::optional<ordered_json> json_schema;
};
// `body` parsed keeping key order (a schema's properties are generated in their order). `chat`:
// response_format is read too (llama-server reads it on the chat route only; kiln on both OpenAI
// routes).
std::optional<HttpError> parse_output_format(const ordered_json& body, bool read_response_format,
                                             OutputFormat& out);

// The server's default output constraint (options.grammar or options.json_schema) into `format`
// when the request set none of its own (llama-server's --grammar / --json-schema).
std::optional<HttpError> default_output_format(const ServerOptions& opt, OutputFormat& format);

// The grammar of a completion (not chat) request's output format, into request.grammar.
std::optional<HttpError> apply_output_format(const OutputFormat& format, GenerationRequest& request);

// Plans the chat of `body` with the state's template and syntax and puts the prompt tokens (with
// the images of image_url parts: serve/media_request.h), the grammar, the preserved tokens and
// the reasoning budget into p.gen. The server's options give the defaults a request may override:
// reasoning_format (--reasoning-format), enable_thinking (-rea; chat_template_kwargs and
// reasoning_effort "none" override it), reasoning_budget_tokens / thinking_budget_tokens and
// reasoning_budget_message (--reasoning-budget, --reasoning-budget-message), and the output
// constraint (--grammar, --json-schema: for requests with no format of their own and no tools).
// Whether the output must go through the chat parser: parse_chat_output below.
std::optional<HttpError> plan_chat_request(const ServerState& st, const ServerOptions& opt, const ordered_json& body,
                                           CompletionRequest& p, chat::ChatPlan& plan);

// Renders body["messages"] (with tools) as plan_chat_request would, into `text` (/apply-template;
// image_url parts become media markers).
std::optional<HttpError> render_chat(const ServerState& st, const ServerOptions& opt, const ordered_json& body,
                                     std::string& text);

// Whether a plan's output is split by the parser: tool calls, or a template with reasoning tags
// (reasoning_content; with reasoning_format none the parser leaves the block in the content).
bool parse_chat_output(const chat::ChatPlan& plan);

}  // namespace kiln::serve
