#include "text/chat/chat_syntax.h"

#include <optional>

#include "text/chat/text_util.h"
#include "text/chat_template.h"

namespace kiln::chat {
namespace {

using json = nlohmann::ordered_json;

// Needles for comparing renders (ref: llama.cpp chat-diff-analyzer.cpp uses the same idea).
constexpr const char* kUser = "U_USER_MSG Hello END_U";
constexpr const char* kContent = "C_ASST_MSG I can help END_C";
constexpr const char* kReasoning = "R_REASON_PART I am thinking END_R";
constexpr const char* kToolName = "FFF_FIRST_FUN_F";
constexpr const char* kArgName = "AA_ARG_FST_AA";
constexpr const char* kArgValue = "XXXX_VALUE";

bool contains(std::string_view s, std::string_view needle) { return s.find(needle) != std::string_view::npos; }

ChatMessage message(std::string role, std::string content, json extra = json::object()) {
  ChatMessage m;
  m.role = std::move(role);
  m.content = std::move(content);
  m.extra = std::move(extra);
  return m;
}

std::optional<std::string> render(const ChatTemplate& t, std::vector<ChatMessage> messages, bool add_generation_prompt,
                                  json extra = json::object()) {
  ChatRenderOptions o;
  o.messages = std::move(messages);
  o.add_generation_prompt = add_generation_prompt;
  o.bos_token = "<s>";
  o.eos_token = "</s>";
  o.extra_context = std::move(extra);
  auto r = t.render(o);
  if (!r.ok()) return std::nullopt;
  return std::move(*r);
}

json probe_tools() {
  json parameters = {{"type", "object"}, {"properties", {{kArgName, {{"type", "string"}}}}}};
  json function = {{"name", kToolName}, {"description", "a probe"}, {"parameters", parameters}};
  json tool = {{"type", "function"}, {"function", function}};
  return json::array({tool});
}

constexpr const char* kSecondTool = "SSS_SECOND_FUN_S";

json probe_call(bool object_arguments, bool two = false) {
  json args = {{kArgName, kArgValue}};
  json calls = json::array();
  for (const char* name : {kToolName, kSecondTool}) {
    calls.push_back({{"id", calls.empty() ? "call00001" : "call00002"},
                     {"type", "function"},
                     {"function", {{"name", name}, {"arguments", object_arguments ? args : json(args.dump())}}}});
    if (!two) break;
  }
  return calls;
}

// The reasoning tags, from a turn rendered with and without reasoning_content.
ReasoningSyntax detect_reasoning(const ChatTemplate& t) {
  const auto with = render(t, {message("user", kUser), message("assistant", kContent, {{"reasoning_content", kReasoning}})}, false);
  const auto without = render(t, {message("user", kUser), message("assistant", kContent)}, false);
  if (with && without && contains(*with, kReasoning)) {
    const DiffSplit d = diff_split(*without, *with);
    const size_t r = d.right.find(kReasoning);
    const size_t c = d.right.find(kContent, r);
    if (r != std::string::npos) {
      ReasoningSyntax rs;
      rs.start = trim(d.right.substr(0, r));
      const size_t after = r + std::string_view(kReasoning).size();
      rs.end = trim(c == std::string::npos ? d.right.substr(after) : d.right.substr(after, c - after));
      if (!rs.end.empty()) return rs;
    }
  }
  // Templates that drop past reasoning but still think (ref: llama.cpp's workaround for old Qwen /
  // DeepSeek templates).
  if (contains(t.source(), "<think>") && contains(t.source(), "</think>")) return {"<think>", "</think>"};
  return {};
}

struct Family {
  const char* name;
  bool (*matches)(std::string_view source);
  void (*apply)(ChatSyntax& s, std::string_view source);
};

void json_in_tags(ToolSyntax& t, const char* start, const char* end) {
  t.shape = ToolSyntax::Shape::JsonObjects;
  t.call_start = start;
  t.call_end = end;
  t.call_separator = "\n";
  t.trigger = trim(start);
}

const Family kFamilies[] = {
    // Ministral / Magistral / Mistral Small 3.2 / Devstral: [TOOL_CALLS]name[CALL_ID]id[ARGS]{...}
    {"mistral-args",
     [](std::string_view s) { return contains(s, "[TOOL_CALLS]") && contains(s, "[ARGS]"); },
     [](ChatSyntax& s, std::string_view source) {
       auto& t = s.tools;
       t.shape = ToolSyntax::Shape::NameThenJson;
       t.call_start = "[TOOL_CALLS]";
       if (contains(source, "[CALL_ID]")) t.id_prefix = "[CALL_ID]";
       t.args_prefix = "[ARGS]";
       t.ids = ToolSyntax::Ids::Alnum9;
       t.trigger = "[TOOL_CALLS]";
       s.preserved_tokens = {"[TOOL_CALLS]", "[CALL_ID]", "[ARGS]"};
     }},
    // Mistral Nemo and other [TOOL_CALLS] templates: a JSON array of calls with 9-character ids.
    {"mistral",
     [](std::string_view s) { return contains(s, "[TOOL_CALLS]"); },
     [](ChatSyntax& s, std::string_view) {
       auto& t = s.tools;
       t.shape = ToolSyntax::Shape::JsonObjects;
       t.section_start = "[TOOL_CALLS]";
       t.array = true;
       t.id_key = "id";
       t.ids = ToolSyntax::Ids::Alnum9;
       t.trigger = "[TOOL_CALLS]";
       s.preserved_tokens = {"[TOOL_CALLS]"};
     }},
    // Command R7B: <|START_ACTION|>[{"tool_call_id": "0", "tool_name": .., "parameters": {..}}]<|END_ACTION|>
    {"command-r7b",
     [](std::string_view s) { return contains(s, "<|START_ACTION|>") && contains(s, "<|END_ACTION|>"); },
     [](ChatSyntax& s, std::string_view) {
       auto& t = s.tools;
       t.shape = ToolSyntax::Shape::JsonObjects;
       t.section_start = "<|START_ACTION|>";
       t.section_end = "<|END_ACTION|>";
       t.array = true;
       t.id_key = "tool_call_id";
       t.id_first = true;
       t.name_key = "tool_name";
       t.args_key = "parameters";
       t.ids = ToolSyntax::Ids::Index;
       t.trigger = "<|START_ACTION|>";
       s.reasoning = {"<|START_THINKING|>", "<|END_THINKING|>"};
       s.content_start = "<|START_RESPONSE|>";
       s.content_end = "<|END_RESPONSE|>";
       s.preserved_tokens = {"<|START_ACTION|>", "<|END_ACTION|>", "<|START_RESPONSE|>", "<|END_RESPONSE|>",
                             "<|START_THINKING|>", "<|END_THINKING|>"};
     }},
    // DeepSeek R1: calls name a function type, then the name, then ```json arguments```.
    {"deepseek-r1",
     [](std::string_view s) { return contains(s, "<｜tool▁calls▁begin｜>") && contains(s, "```json"); },
     [](ChatSyntax& s, std::string_view) {
       auto& t = s.tools;
       t.shape = ToolSyntax::Shape::NameThenJson;
       t.section_start = "<｜tool▁calls▁begin｜>";
       t.section_end = "<｜tool▁calls▁end｜>";
       t.call_start = "<｜tool▁call▁begin｜>function<｜tool▁sep｜>";
       t.args_prefix = "\n```json\n";
       t.args_suffix = "\n```";
       t.call_end = "<｜tool▁call▁end｜>";
       t.call_separator = "\n";
       t.trigger = "<｜tool▁calls▁begin｜>";
       s.reasoning = {"<think>", "</think>"};
       s.preserved_tokens = {"<think>", "</think>", "<｜tool▁calls▁begin｜>", "<｜tool▁call▁begin｜>", "<｜tool▁sep｜>",
                             "<｜tool▁call▁end｜>", "<｜tool▁calls▁end｜>"};
     }},
    // DeepSeek V3.1: <｜tool▁call▁begin｜>name<｜tool▁sep｜>{...}<｜tool▁call▁end｜>
    {"deepseek-v3.1",
     [](std::string_view s) { return contains(s, "<｜tool▁calls▁begin｜>") && contains(s, "<｜tool▁sep｜>"); },
     [](ChatSyntax& s, std::string_view) {
       auto& t = s.tools;
       t.shape = ToolSyntax::Shape::NameThenJson;
       t.section_start = "<｜tool▁calls▁begin｜>";
       t.section_end = "<｜tool▁calls▁end｜>";
       t.call_start = "<｜tool▁call▁begin｜>";
       t.name_suffix = "<｜tool▁sep｜>";
       t.call_end = "<｜tool▁call▁end｜>";
       t.trigger = "<｜tool▁calls▁begin｜>";
       s.preserved_tokens = {"<think>", "</think>", "<｜tool▁calls▁begin｜>", "<｜tool▁call▁begin｜>", "<｜tool▁sep｜>",
                             "<｜tool▁call▁end｜>", "<｜tool▁calls▁end｜>"};
     }},
    // Kimi K2: <|tool_call_begin|>functions.name:0<|tool_call_argument_begin|>{...}<|tool_call_end|>
    {"kimi-k2",
     [](std::string_view s) { return contains(s, "<|tool_calls_section_begin|>") && contains(s, "<|tool_call_begin|>"); },
     [](ChatSyntax& s, std::string_view) {
       auto& t = s.tools;
       t.shape = ToolSyntax::Shape::NameThenJson;
       t.section_start = "<|tool_calls_section_begin|>";
       t.section_end = "<|tool_calls_section_end|>";
       t.call_start = "<|tool_call_begin|>";
       t.name_prefix = "functions.";
       t.id_prefix = ":";
       t.args_prefix = "<|tool_call_argument_begin|>";
       t.call_end = "<|tool_call_end|>";
       t.ids = ToolSyntax::Ids::Index;
       t.trigger = "<|tool_calls_section_begin|>";
       s.preserved_tokens = {"<|tool_calls_section_begin|>", "<|tool_calls_section_end|>", "<|tool_call_begin|>",
                             "<|tool_call_argument_begin|>", "<|tool_call_end|>"};
     }},
    // Qwen3-Coder, Nemotron 3, Qwen 3.5: <tool_call>\n<function=name>\n<parameter=k>\nv\n</parameter>\n</function>\n</tool_call>
    {"qwen3-coder",
     [](std::string_view s) {
       return contains(s, "<tool_call>") && contains(s, "<function=") && contains(s, "<parameter=");
     },
     [](ChatSyntax& s, std::string_view) {
       auto& t = s.tools;
       t.shape = ToolSyntax::Shape::TaggedArgs;
       t.call_start = "<tool_call>\n";
       t.name_prefix = "<function=";
       t.name_suffix = ">\n";
       t.arg_prefix = "<parameter=";
       t.arg_infix = ">\n";
       t.arg_suffix = "\n</parameter>\n";
       t.args_suffix = "</function>\n";
       t.call_end = "</tool_call>";
       t.call_separator = "\n";
       t.trigger = "<tool_call>";
       s.preserved_tokens = {"<tool_call>", "</tool_call>"};
     }},
    // GLM 4.5 / 4.6: <tool_call>name\n<arg_key>k</arg_key>\n<arg_value>v</arg_value>\n</tool_call>
    {"glm",
     [](std::string_view s) { return contains(s, "<arg_key>") && contains(s, "<arg_value>"); },
     [](ChatSyntax& s, std::string_view) {
       auto& t = s.tools;
       t.shape = ToolSyntax::Shape::TaggedArgs;
       t.call_start = "<tool_call>";
       t.name_suffix = "\n";
       t.arg_prefix = "<arg_key>";
       t.arg_infix = "</arg_key>\n<arg_value>";
       t.arg_suffix = "</arg_value>\n";
       t.call_end = "</tool_call>";
       t.call_separator = "\n";
       t.trigger = "<tool_call>";
       s.preserved_tokens = {"<tool_call>", "</tool_call>", "<arg_key>", "</arg_key>", "<arg_value>", "</arg_value>"};
     }},
    // MiniMax M2: <minimax:tool_call>\n<invoke name="f">\n<parameter name="k">v</parameter>\n</invoke>\n</minimax:tool_call>
    {"minimax-m2",
     [](std::string_view s) { return contains(s, "<minimax:tool_call>") && contains(s, "<invoke name="); },
     [](ChatSyntax& s, std::string_view) {
       auto& t = s.tools;
       t.shape = ToolSyntax::Shape::TaggedArgs;
       t.section_start = "<minimax:tool_call>\n";
       t.section_end = "</minimax:tool_call>";
       t.name_prefix = "<invoke name=\"";
       t.name_suffix = "\">\n";
       t.arg_prefix = "<parameter name=\"";
       t.arg_infix = "\">";
       t.arg_suffix = "</parameter>\n";
       t.args_suffix = "</invoke>\n";
       t.trigger = "<minimax:tool_call>";
       s.preserved_tokens = {"<minimax:tool_call>", "</minimax:tool_call>"};
     }},
    // Hermes 2 Pro / 3, Qwen 2.5 / 3, SmolLM3: <tool_call>\n{"name": .., "arguments": {..}}\n</tool_call>
    {"hermes",
     [](std::string_view s) { return contains(s, "<tool_call>"); },
     [](ChatSyntax& s, std::string_view) {
       json_in_tags(s.tools, "<tool_call>\n", "\n</tool_call>");
       s.preserved_tokens = {"<tool_call>", "</tool_call>"};
     }},
    // Nemotron Nano v2: <TOOLCALL>[{"name": .., "arguments": {..}}]</TOOLCALL>
    {"nemotron-v2",
     [](std::string_view s) { return contains(s, "<TOOLCALL>"); },
     [](ChatSyntax& s, std::string_view) {
       auto& t = s.tools;
       t.shape = ToolSyntax::Shape::JsonObjects;
       t.section_start = "<TOOLCALL>";
       t.section_end = "</TOOLCALL>";
       t.array = true;
       t.trigger = "<TOOLCALL>";
       s.preserved_tokens = {"<TOOLCALL>", "</TOOLCALL>"};
     }},
    // Granite 3.x: <|tool_call|>[{"name": .., "arguments": {..}}]; thinking writes
    // <think>..</think><response>..</response>.
    {"granite",
     [](std::string_view s) { return contains(s, "<|tool_call|>"); },
     [](ChatSyntax& s, std::string_view) {
       auto& t = s.tools;
       t.shape = ToolSyntax::Shape::JsonObjects;
       t.section_start = "<|tool_call|>";
       t.array = true;
       t.trigger = "<|tool_call|>";
       s.preserved_tokens = {"<|tool_call|>"};
       if (s.reasoning.supported()) {
         s.content_start = "<response>";
         s.content_end = "</response>";
       }
     }},
    // Functionary v3.1 (Llama 3.1 based): <function=name>{...}</function>
    {"functionary-v3.1",
     [](std::string_view s) { return contains(s, "<function=") && contains(s, "</function>") && contains(s, "<|eom_id|>"); },
     [](ChatSyntax& s, std::string_view) {
       auto& t = s.tools;
       t.shape = ToolSyntax::Shape::NameThenJson;
       t.call_start = "<function=";
       t.name_suffix = ">";
       t.call_end = "</function>";
       t.trigger = "<function=";
       s.preserved_tokens = {"<function=", "</function>"};
     }},
    // Llama 3.x: a bare {"name": .., "parameters": {..}} object.
    {"llama3",
     [](std::string_view s) {
       return contains(s, "<|start_header_id|>") && contains(s, "ipython") && contains(s, "\"parameters\"");
     },
     [](ChatSyntax& s, std::string_view) {
       auto& t = s.tools;
       t.shape = ToolSyntax::Shape::JsonObjects;
       t.args_key = "parameters";
       t.call_separator = "\n";
     }},
};

}  // namespace

ChatSyntax detect_chat_syntax(const ChatTemplate& tmpl) {
  ChatSyntax s;
  const std::string& source = tmpl.source();
  s.reasoning = detect_reasoning(tmpl);

  // Tool definitions: does the template show them, and how does it want call arguments?
  const auto with_tools = render(tmpl, {message("user", kUser)}, true, {{"tools", probe_tools()}});
  s.renders_tools = with_tools && contains(*with_tools, kToolName);
  const auto object_call = render(tmpl, {message("user", kUser), message("assistant", "", {{"tool_calls", probe_call(true)}})}, false,
                                  {{"tools", probe_tools()}});
  const auto string_call = render(tmpl, {message("user", kUser), message("assistant", "", {{"tool_calls", probe_call(false)}})}, false,
                                  {{"tools", probe_tools()}});
  const std::string object_form = std::string("\"") + kArgName + "\": \"" + kArgValue + "\"";
  const bool object_ok = object_call && contains(*object_call, object_form);
  const bool string_ok = string_call && contains(*string_call, object_form);
  s.object_arguments = object_ok || !string_ok;
  // The argument's value appears only where a call is written (the tool list names the tool too).
  s.renders_calls = (object_call && contains(*object_call, kArgValue)) || (string_call && contains(*string_call, kArgValue));
  const auto two_calls = render(tmpl, {message("user", kUser), message("assistant", "", {{"tool_calls", probe_call(s.object_arguments, true)}})},
                                false, {{"tools", probe_tools()}});
  s.parallel_calls = !s.renders_calls || (two_calls && contains(*two_calls, kToolName) && contains(*two_calls, kSecondTool));

  for (const Family& f : kFamilies) {
    if (!f.matches(source)) continue;
    s.family = f.name;
    f.apply(s, source);
    return s;
  }
  s.family = "generic";
  s.tools.shape = ToolSyntax::Shape::Generic;
  return s;
}

}  // namespace kiln::chat
