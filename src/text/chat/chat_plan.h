// plan_chat: one chat request (messages, tools, tool_choice, response format, reasoning options)
// turned into what generation needs: the prompt text, the grammar that constrains the output (a
// tool-call grammar, lazy for tool_choice auto; a JSON-schema grammar; or the request's own), and
// the options of the parser that splits the output into reasoning, content and tool calls
// (ref: llama.cpp common_chat_templates_apply and llama-server's oaicompat_chat_params_parse).
//
//   ChatSyntax syntax = detect_chat_syntax(tmpl);            // once per template
//   KILN_ASSIGN_OR_RETURN(ChatPlan plan, plan_chat(tmpl, syntax, request));
//   tokenize plan.prompt; attach plan.grammar (GrammarConstraint) to the sampler;
//   ChatOutputParser parser(plan.parser, make_id); stream parser.feed(piece) ...
//
// Thread-safety: pure; any number of plans may be made at once from one template.
#pragma once

#include <chrono>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"
#include "text/chat/chat_syntax.h"
#include "text/chat/output_parser.h"
#include "text/chat/tools.h"
#include "text/chat_template.h"
#include "text/grammar/grammar_constraint.h"

namespace kiln::chat {

struct ChatRequest {
  std::vector<ChatMessage> messages;  // chat_messages_from_json(); assistant tool_calls and
                                      // role "tool" messages are kept in ChatMessage::extra
  std::vector<ToolDef> tools;
  ToolChoice tool_choice;
  bool parallel_tool_calls = false;
  ReasoningFormat reasoning_format = ReasoningFormat::Auto;
  // -rea on/off or chat_template_kwargs.enable_thinking; nullopt: the template's default.
  std::optional<bool> enable_thinking;
  // More template variables (chat_template_kwargs); must be an object.
  nlohmann::ordered_json template_kwargs = nlohmann::ordered_json::object();
  // response_format {type: json_schema} (the schema) or {type: json_object} ({"type": "object"}).
  std::optional<nlohmann::ordered_json> json_schema;
  std::string grammar;  // a GBNF grammar of the request ("grammar")
  // false: the prompt ends after the last message, the assistant's turn not opened (the plan's
  // generation_prompt still says what opening it would add).
  bool add_generation_prompt = true;
  std::string bos_token, eos_token;
  std::function<std::chrono::system_clock::time_point()> clock;  // empty: the system clock
};

struct ChatPlan {
  std::string prompt;             // the conversation, rendered, generation prompt included
  std::string generation_prompt;  // what the generation prompt added (e.g. "<|im_start|>assistant\n")
  std::optional<grammar::GrammarSpec> grammar;
  bool grammar_from_request = false;  // the request's own grammar (llama.cpp prefills only the others)
  ParserOptions parser;
  std::vector<std::string> preserved_tokens;  // control tokens whose text the parser needs
  // The reasoning block's tags, for --reasoning-budget (empty: the model does not reason).
  std::string reasoning_start, reasoning_end;
};

// The text the generation prompt adds: `with` (rendered with add_generation_prompt) after its
// common prefix with `without` (the same conversation rendered without it).
std::string generation_prompt_text(std::string_view without, std::string_view with);

// Errors (a client's mistake, answered 400): tools with a grammar or a response format, tool call
// arguments that are not JSON, a template error, a JSON schema or tool schema kiln refuses.
Result<ChatPlan> plan_chat(const ChatTemplate& tmpl, const ChatSyntax& syntax, const ChatRequest& request);

}  // namespace kiln::chat
