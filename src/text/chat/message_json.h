// A parsed answer (output_parser.h) as OpenAI's chat message, for the server's responses and the
// C API's kiln_model_parse_chat_output alike: {"role": "assistant", "content", and when present
// "reasoning_content" and "tool_calls": [{"id", "type": "function", "function": {"name",
// "arguments"}}]}; content is null when the model only called tools. Json is nlohmann::json or
// nlohmann::ordered_json (the latter keeps this key order when dumped).
#pragma once

#include <vector>

#include "text/chat/output_parser.h"

namespace kiln::chat {

template <typename Json>
Json tool_calls_json(const std::vector<ToolCall>& calls) {
  Json out = Json::array();
  for (const ToolCall& c : calls)
    out.push_back(
        {{"id", c.id}, {"type", "function"}, {"function", {{"name", c.name}, {"arguments", c.arguments}}}});
  return out;
}

template <typename Json>
Json message_json(const ParsedMessage& m) {
  Json msg = {{"role", "assistant"},
              {"content", m.content.empty() && !m.tool_calls.empty() ? Json(nullptr) : Json(m.content)}};
  if (!m.reasoning_content.empty()) msg["reasoning_content"] = m.reasoning_content;
  if (!m.tool_calls.empty()) msg["tool_calls"] = tool_calls_json<Json>(m.tool_calls);
  return msg;
}

}  // namespace kiln::chat
