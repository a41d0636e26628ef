// OpenAI-style tool definitions and tool_choice, and the grammar that makes a model write tool
// calls in its template's syntax (ref: llama.cpp common/chat-auto-parser-generator.cpp: a lazy
// grammar triggered by the syntax's marker for tool_choice auto, a grammar from the start for
// required or a named function).
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "core/result.h"
#include "text/chat/chat_syntax.h"
#include "text/grammar/grammar_constraint.h"

namespace kiln::chat {

struct ToolDef {
  std::string name;
  std::string description;
  nlohmann::ordered_json parameters = nlohmann::ordered_json::object();  // a JSON schema
  nlohmann::ordered_json json;  // the whole {"type": "function", "function": {...}} as given
};

struct ToolCall {
  std::string id;
  std::string name;
  std::string arguments;  // JSON text (an object)
  bool operator==(const ToolCall&) const = default;
};

struct ToolChoice {
  enum class Mode { Auto, None, Required, Named };
  Mode mode = Mode::Auto;
  std::string name;  // Mode::Named
};

// `tools`: [{"type": "function", "function": {"name", "description"?, "parameters"?}}, ...].
// Errors name the index and field ("tools[1].function.name: missing").
Result<std::vector<ToolDef>> tools_from_json(const nlohmann::ordered_json& tools);
// "auto" | "none" | "required" | {"type": "function", "function": {"name": ...}}; a named
// function must be one of `tools`.
Result<ToolChoice> tool_choice_from_json(const nlohmann::ordered_json& choice, const std::vector<ToolDef>& tools);

struct ToolGrammarOptions {
  const std::vector<ToolDef>* tools = nullptr;  // non-owning; the tools the model may call
  ToolChoice choice;                             // Auto, Required or Named
  bool parallel = false;                         // more than one call in a turn
  bool starts_in_reasoning = false;              // the prompt ends inside a reasoning block
};

// The grammar for tool calls in `syntax`; nullopt when none applies (tool_choice auto with a
// syntax that has no marker to trigger on: the output is only parsed). Errors: a tool's
// parameters schema the JSON-schema converter refuses.
Result<std::optional<grammar::GrammarSpec>> tool_call_grammar(const ChatSyntax& syntax, const ToolGrammarOptions& options);

// The text a model of `syntax` writes for `calls` (what parse_output reads back): examples in
// prompts, and tests.
std::string format_calls(const ChatSyntax& syntax, const std::vector<ToolCall>& calls);

// The system text that describes the tools to a template that does not show them itself: the
// tools as JSON and how to call one (the generic format's JSON answer, or the family's syntax).
std::string describe_tools(const ChatSyntax& syntax, const std::vector<ToolDef>& tools, bool parallel);

}  // namespace kiln::chat
