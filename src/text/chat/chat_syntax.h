// ChatSyntax: how a model's chat template writes an assistant turn: the reasoning block, the
// content, and tool calls. detect_chat_syntax() derives it from the template the way llama.cpp's
// chat code does (ref: common/chat.cpp common_chat_try_specialized_template, common/chat-diff-
// analyzer.cpp): by markers in the template source for the known families and by comparing the
// template's renders (with and without reasoning, with and without the generation prompt, with
// one and two tool calls) for the exact strings.
//
// Families: Hermes / Qwen 2.5 / Qwen 3 (<tool_call> JSON), Qwen3-Coder (<function=..> with tagged
// parameters), Llama 3.x (bare JSON with "parameters"), Mistral Nemo ([TOOL_CALLS] JSON array
// with ids), Mistral Small 3.2 / Magistral / Devstral ([TOOL_CALLS]name[CALL_ID]id[ARGS]{...}),
// Functionary v3.1 (<function=name>{...}</function>) and v3.2 (>>>name\n{...}), Command R7B
// (<|START_ACTION|>[...]<|END_ACTION|>), DeepSeek R1 and V3.1, Granite 3.x (<|tool_call|>[...]),
// Nemotron Nano v2 (<TOOLCALL>[...]</TOOLCALL>), GLM 4.x (<arg_key>/<arg_value>), MiniMax M2
// (<invoke name=..>), Kimi K2; templates that render no tool calls get kiln's generic JSON format
// (the tools described in a system message, the answer a JSON object).
// Thread-safety: plain values.
#pragma once

#include <string>
#include <vector>

#include "core/result.h"

namespace kiln {
class ChatTemplate;
}

namespace kiln::chat {

// How tool calls are written.
struct ToolSyntax {
  enum class Shape {
    Generic,       // no template support: {"tool_calls": [{"name": .., "arguments": {..}}]} or {"response": ".."}
    JsonObjects,   // each call a JSON object naming the function and holding the arguments
    NameThenJson,  // name_prefix NAME name_suffix [id] args_prefix {JSON arguments} args_suffix
    TaggedArgs,    // name_prefix NAME name_suffix (arg_prefix KEY arg_infix VALUE arg_suffix)*
  };
  Shape shape = Shape::Generic;
  std::string section_start, section_end;  // around all the calls of a turn
  std::string call_start, call_end;        // around each call
  std::string call_separator;              // between two calls (after call_end)
  // JsonObjects: keys of the call object; id_key empty when calls carry no id. A call object
  // nested in {"type": "function", "function": {...}} is not used by any family here.
  std::string name_key = "name", args_key = "arguments", id_key;
  bool id_first = false;  // the id key comes first (Command R7B), else last (Mistral)
  bool array = false;  // JsonObjects inside [ ... ] (separator ", ")
  // NameThenJson / TaggedArgs.
  std::string name_prefix, name_suffix;
  std::string id_prefix;  // before a call id written between the name and the arguments ([CALL_ID])
  std::string args_prefix, args_suffix;
  // TaggedArgs: each argument.
  std::string arg_prefix, arg_infix, arg_suffix;
  // Call ids: how the model writes them when it does (id_key / id_prefix), else ids are made up.
  enum class Ids { Random, Alnum9, Index } ids = Ids::Random;
  // The text a lazy grammar waits for (empty: none, tool calls cannot be told from content until
  // the output ends, as with Llama 3.x's bare JSON).
  std::string trigger;
};

// A reasoning block: start, the thoughts, end. Empty start and end: the model does not reason.
struct ReasoningSyntax {
  std::string start, end;  // "<think>", "</think>"
  bool supported() const { return !end.empty(); }
};

struct ChatSyntax {
  std::string family;  // "hermes", "llama3", ..., "generic"
  ToolSyntax tools;
  ReasoningSyntax reasoning;
  // Content wrapped in markers (Command R7B's <|START_RESPONSE|>...<|END_RESPONSE|>, Granite's
  // <response>...</response> after reasoning), else empty.
  std::string content_start, content_end;
  // Control tokens the output must keep as text for the parser (llama.cpp's preserved_tokens).
  std::vector<std::string> preserved_tokens;
  // Whether the template renders tool calls with arguments as objects (true) or as JSON strings.
  bool object_arguments = true;
  // Whether the template reads the `tools` variable (false: kiln describes them in a system message).
  bool renders_tools = true;
  // Whether it writes the tool calls of past assistant turns, and more than one in a turn.
  bool renders_calls = true;
  bool parallel_calls = true;
};

// The syntax of `tmpl`'s assistant turns. Never fails: unknown templates get the generic format.
ChatSyntax detect_chat_syntax(const ChatTemplate& tmpl);

}  // namespace kiln::chat
