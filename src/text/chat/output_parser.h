// The model's output text split into reasoning_content, content and tool_calls, whole or while
// it streams (ref: llama.cpp common/chat.cpp common_chat_parse, common_chat_msg_diff): the
// streaming parser re-parses the text so far as a partial output, holding back whatever may still
// turn into a marker, and hands out only what was added since the last call; the pieces it hands
// out add up to the parse of the whole text.
//
//   ChatOutputParser p(options, make_id);
//   for (token text t) send(p.feed(t));
//   send(p.finish());  const ParsedMessage& m = p.message();
//
// Reasoning formats (llama-server's --reasoning-format): None leaves the reasoning block in the
// content (opened_reasoning first when the prompt opened it); Auto, Deepseek and DeepseekLegacy
// move it to reasoning_content, in answers and stream deltas alike (llama-server's parser no
// longer keeps the block in the content for deepseek-legacy: same output as deepseek).
// Thread-safety: none; one parser per generation.
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "text/chat/chat_syntax.h"
#include "text/chat/tools.h"

namespace kiln::chat {

enum class ReasoningFormat { None, Auto, Deepseek, DeepseekLegacy };
// "none", "auto", "deepseek", "deepseek-legacy".
Result<ReasoningFormat> reasoning_format_from_name(std::string_view name);

struct ParsedMessage {
  std::string reasoning_content;
  std::string content;
  std::vector<ToolCall> tool_calls;
  bool operator==(const ParsedMessage&) const = default;
};

struct ParserOptions {
  ChatSyntax syntax;
  ReasoningFormat reasoning_format = ReasoningFormat::Auto;
  bool starts_in_reasoning = false;  // the prompt ended inside a reasoning block
  // With starts_in_reasoning: the generation prompt from the reasoning start tag on ("<think>\n");
  // format None puts it before the content, as llama-server does (the block shows as written).
  std::string opened_reasoning{};
  bool parse_tool_calls = false;     // tools were given and tool_choice is not none
  std::vector<ToolDef> tools;        // their parameter schemas (tagged arguments are typed by them)
};

// The whole output; `partial`: more text may follow (ambiguous tails are held back).
ParsedMessage parse_output(std::string_view text, bool partial, const ParserOptions& options);

// What a stretch of streamed output added.
struct ToolCallDelta {
  size_t index = 0;
  std::string id, name;   // on a call's first delta only
  std::string arguments;  // the new part of its JSON arguments
};
struct ChatDelta {
  std::string reasoning_content;
  std::string content;
  std::vector<ToolCallDelta> tool_calls;
  bool empty() const { return reasoning_content.empty() && content.empty() && tool_calls.empty(); }
};

class ChatOutputParser {
 public:
  // `make_id` names the tool calls whose text carries no id (llama-server: 32 random characters).
  ChatOutputParser(ParserOptions options, std::function<std::string()> make_id);

  ChatDelta feed(std::string_view text);
  ChatDelta finish();
  // The message so far (after finish(): the whole output's parse, ids filled in).
  const ParsedMessage& message() const { return current_; }

 private:
  ChatDelta advance(bool partial);

  ParserOptions options_;
  std::function<std::string()> make_id_;
  std::string text_;
  ParsedMessage current_;
  std::vector<std::string> ids_;  // by call index, once made
};

}  // namespace kiln::chat
