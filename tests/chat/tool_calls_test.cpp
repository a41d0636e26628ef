// Tool calls per template family: the family each template is recognised as; the calls a template
// renders itself parse back to the same names and arguments; the tool-call grammar accepts that
// rendered text (so the grammar and the template agree); and prompts render the tools.
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <nlohmann/json.hpp>

#include "chat/chat_test_util.h"
#include "text/chat/chat_plan.h"
#include "text/chat/output_parser.h"
#include "text/chat/text_util.h"
#include "text/grammar/grammar_matcher.h"

namespace kiln::chat {
namespace {

using json = nlohmann::ordered_json;
using testing::load_template;

struct FamilyCase {
  const char* file;
  const char* family;
};

// Every template of tests/data/templates and tests/chat/data/templates, with the family expected.
const FamilyCase kFamilies[] = {
    {"Qwen-Qwen2.5-7B-Instruct.jinja", "hermes"},
    {"Qwen-Qwen3-0.6B.jinja", "hermes"},
    {"NousResearch-Hermes-2-Pro-Llama-3-8B-tool_use.jinja", "hermes"},
    {"Qwen3-Coder.jinja", "qwen3-coder"},
    {"meta-llama-Llama-3.1-8B-Instruct.jinja", "llama3"},
    {"meta-llama-Llama-3.2-3B-Instruct.jinja", "llama3"},
    {"mistralai-Mistral-Nemo-Instruct-2407.jinja", "mistral"},
    {"Mistral-Small-3.2-24B-Instruct-2506.jinja", "mistral-args"},
    {"meetkai-functionary-medium-v3.1.jinja", "functionary-v3.1"},
    {"CohereForAI-c4ai-command-r7b-12-2024-tool_use.jinja", "command-r7b"},
    {"llama-cpp-deepseek-r1.jinja", "deepseek-r1"},
    {"deepseek-ai-DeepSeek-R1-Distill-Llama-8B.jinja", "deepseek-r1"},
    {"deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja", "deepseek-r1"},
    {"deepseek-ai-DeepSeek-V3.1.jinja", "deepseek-v3.1"},
    {"ibm-granite-granite-3.3-2B-Instruct.jinja", "granite"},
    {"GLM-4.6.jinja", "glm"},
    {"MiniMax-M2.jinja", "minimax-m2"},
    {"NVIDIA-Nemotron-Nano-v2.jinja", "nemotron-v2"},
    {"Kimi-K2-Instruct.jinja", "kimi-k2"},
    {"microsoft-Phi-3.5-mini-instruct.jinja", "generic"},
    {"HuggingFaceTB-SmolLM3-3B.jinja", "generic"},
    {"LFM2.5-Instruct.jinja", "generic"},
    {"google-gemma-4-31B-it.jinja", "generic"},
    {"openai-gpt-oss-120b.jinja", "generic"},
};

TEST(ChatSyntax, DetectsEachTemplatesFamily) {
  for (const FamilyCase& c : kFamilies) {
    EXPECT_EQ(detect_chat_syntax(load_template(c.file)).family, c.family) << c.file;
  }
}

TEST(ChatSyntax, DetectsReasoningTags) {
  EXPECT_EQ(detect_chat_syntax(load_template("Qwen-Qwen3-0.6B.jinja")).reasoning.end, "</think>");
  EXPECT_EQ(detect_chat_syntax(load_template("CohereForAI-c4ai-command-r7b-12-2024-tool_use.jinja")).reasoning.start,
            "<|START_THINKING|>");
  EXPECT_FALSE(detect_chat_syntax(load_template("Qwen-Qwen2.5-7B-Instruct.jinja")).reasoning.supported());
  EXPECT_FALSE(detect_chat_syntax(load_template("meta-llama-Llama-3.1-8B-Instruct.jinja")).reasoning.supported());
}

json weather_tool() {
  return json::parse(R"({"type": "function", "function": {"name": "get_weather", "description": "Current weather",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}, "unit": {"type": "string", "enum": ["c", "f"]}},
    "required": ["city"]}}})");
}
json time_tool() {
  return json::parse(R"({"type": "function", "function": {"name": "get_time", "description": "Time in a zone",
    "parameters": {"type": "object", "properties": {"zone": {"type": "string"}, "offset": {"type": "integer"}}, "required": ["zone"]}}})");
}
std::vector<ToolDef> tool_defs() {
  auto t = tools_from_json(json::array({weather_tool(), time_tool()}));
  KILN_ASSERT(t.ok(), "test tools parse");
  return *t;
}

const json kCalls = json::parse(R"([
  {"id": "call00001", "type": "function", "function": {"name": "get_weather", "arguments": {"city": "Paris", "unit": "c"}}},
  {"id": "call00002", "type": "function", "function": {"name": "get_time", "arguments": {"zone": "CET", "offset": 2}}}])");

ChatMessage message(const std::string& role, const std::string& content, json extra = json::object()) {
  ChatMessage m;
  m.role = role;
  m.content = content;
  m.extra = std::move(extra);
  return m;
}

// The text the template writes for an assistant turn holding `calls`, from the first call marker
// to the end of the last call.
std::string rendered_calls(const ChatTemplate& t, const ChatSyntax& s, const json& calls) {
  ChatRenderOptions o;
  o.add_generation_prompt = false;
  o.extra_context = {{"tools", json::array({weather_tool(), time_tool()})}};
  o.messages = {message("user", "Weather and time in Paris?")};
  const auto before = t.render(o);
  o.messages.push_back(message("assistant", "", {{"tool_calls", calls}}));
  const auto after = t.render(o);
  EXPECT_TRUE(before.ok() && after.ok());
  if (!before.ok() || !after.ok()) return "";
  const std::string turn = diff_split(*before, *after).right;
  const std::string trigger = trim(!s.tools.section_start.empty() ? s.tools.section_start : s.tools.call_start);
  const size_t begin = trigger.empty() ? turn.find('{') : turn.find(trigger);
  EXPECT_NE(begin, std::string::npos) << turn;
  if (begin == std::string::npos) return "";
  size_t end = 0;
  for (const std::string& m : {trim(s.tools.section_end), trim(s.tools.call_end), trim(s.tools.args_suffix), std::string("]"),
                               std::string("}")}) {
    if (m.empty()) continue;
    const size_t f = turn.rfind(m);
    if (f != std::string::npos) end = std::max(end, f + m.size());
  }
  return turn.substr(begin, end - begin);
}

void expect_calls(const ParsedMessage& m, const json& calls, const std::string& what) {
  ASSERT_EQ(m.tool_calls.size(), calls.size()) << what;
  for (size_t i = 0; i < calls.size(); ++i) {
    EXPECT_EQ(m.tool_calls[i].name, calls[i]["function"]["name"]) << what;
    const json args = json::parse(m.tool_calls[i].arguments, nullptr, false);
    EXPECT_EQ(args, calls[i]["function"]["arguments"]) << what << ": " << m.tool_calls[i].arguments;
  }
}

// The calls a template renders: two when it takes several in a turn, else the first.
json calls_for(const ChatSyntax& s) { return s.parallel_calls ? kCalls : json::array({kCalls[0]}); }

TEST(ToolCalls, TemplateRenderedCallsParseBack) {
  for (const FamilyCase& c : kFamilies) {
    if (std::string(c.family) == "generic") continue;
    const ChatTemplate t = load_template(c.file);
    const ChatSyntax s = detect_chat_syntax(t);
    if (!s.renders_calls) continue;  // covered by FormattedCallsParseBack
    const json calls = calls_for(s);
    const std::string text = rendered_calls(t, s, calls);
    ParserOptions o{.syntax = s, .parse_tool_calls = true, .tools = tool_defs()};
    const ParsedMessage m = parse_output(text, false, o);
    expect_calls(m, calls, std::string(c.file) + ": " + text);
    EXPECT_EQ(m.content, "") << c.file << ": " << text;
  }
}

// The grammar of tool_choice "required" (several calls allowed) accepts the template's own text.
TEST(ToolCalls, GrammarAcceptsTheTemplatesCalls) {
  const auto tools = tool_defs();
  for (const FamilyCase& c : kFamilies) {
    if (std::string(c.family) == "generic") continue;
    const ChatTemplate t = load_template(c.file);
    const ChatSyntax s = detect_chat_syntax(t);
    if (!s.renders_calls) continue;
    const std::string text = rendered_calls(t, s, calls_for(s));
    auto spec = tool_call_grammar(s, {.tools = &tools, .choice = {ToolChoice::Mode::Required, ""}, .parallel = true});
    ASSERT_TRUE(spec.ok()) << c.file << ": " << spec.error().message;
    ASSERT_TRUE(spec->has_value()) << c.file;
    auto g = grammar::Grammar::parse((*spec)->gbnf);
    ASSERT_TRUE(g.ok()) << c.file << ": " << g.error().message << "\n" << (*spec)->gbnf;
    grammar::GrammarMatcher m(std::make_shared<const grammar::Grammar>(std::move(*g)));
    bool ok = true;
    for (size_t i = 0; i < text.size() && ok; ++i) ok = m.accept_token(-1, text.substr(i, 1)).ok();
    EXPECT_TRUE(ok && m.complete()) << c.file << " rejects:\n" << text << "\n" << (*spec)->gbnf;
  }
}

// The calls with ids as `s` writes them (Command R7B and Kimi K2: the call's index).
std::vector<ToolCall> tool_calls_of(const json& calls, const ChatSyntax& s) {
  std::vector<ToolCall> out;
  for (const auto& c : calls) {
    const std::string id = s.tools.ids == ToolSyntax::Ids::Index ? std::to_string(out.size()) : c["id"].get<std::string>();
    out.push_back({id, c["function"]["name"], c["function"]["arguments"].dump()});
  }
  return out;
}

// Every family's syntax (the generic one too), written by format_calls: parsed back, and accepted
// by the grammar of tool_choice "required".
TEST(ToolCalls, FormattedCallsParseBackAndMatchTheGrammar) {
  const auto tools = tool_defs();
  for (const FamilyCase& c : kFamilies) {
    const ChatSyntax s = detect_chat_syntax(load_template(c.file));
    const json calls = calls_for(s);
    const std::string text = format_calls(s, tool_calls_of(calls, s));
    ParserOptions o{.syntax = s, .parse_tool_calls = true, .tools = tools};
    expect_calls(parse_output(text, false, o), calls, std::string(c.file) + ": " + text);
    auto spec = tool_call_grammar(s, {.tools = &tools, .choice = {ToolChoice::Mode::Required, ""}, .parallel = s.parallel_calls});
    ASSERT_TRUE(spec.ok() && spec->has_value()) << c.file;
    auto g = grammar::Grammar::parse((*spec)->gbnf);
    ASSERT_TRUE(g.ok()) << c.file;
    grammar::GrammarMatcher m(std::make_shared<const grammar::Grammar>(std::move(*g)));
    bool ok = true;
    for (size_t i = 0; i < text.size() && ok; ++i) ok = m.accept_token(-1, text.substr(i, 1)).ok();
    EXPECT_TRUE(ok && m.complete()) << c.file << " rejects:\n" << text << "\n" << (*spec)->gbnf;
  }
}

// Issue 30: a tool whose parameters use $defs/$ref (as Pydantic writes them) was refused
// ("'$defs' not found"). References resolve in each tool's own parameters, as llama.cpp resolves
// them: two tools that both define "#/$defs/Item", differently, each get their own, in every
// family's call syntax.
TEST(ToolCalls, ParameterRefsResolvePerTool) {
  const json item_object = {{"type", "object"}, {"properties", {{"name", {{"type", "string"}}}}}, {"required", {"name"}}};
  auto tool = [](const char* name, const json& item) {
    return json{{"type", "function"},
                {"function",
                 {{"name", name},
                  {"parameters",
                   {{"type", "object"},
                    {"properties", {{"item", {{"$ref", "#/$defs/Item"}}}}},
                    {"required", {"item"}},
                    {"$defs", {{"Item", item}}}}}}}};
  };
  auto tools = tools_from_json(json::array({tool("add_item", item_object), tool("set_count", {{"type", "integer"}})}));
  ASSERT_TRUE(tools.ok()) << tools.error().message;
  auto call = [](const char* name, const json& args) {
    return json::array({{{"id", "call00001"}, {"type", "function"}, {"function", {{"name", name}, {"arguments", args}}}}});
  };
  for (const FamilyCase& c : kFamilies) {
    const ChatSyntax s = detect_chat_syntax(load_template(c.file));
    auto spec = tool_call_grammar(s, {.tools = &*tools, .choice = {ToolChoice::Mode::Required, ""}, .parallel = false});
    ASSERT_TRUE(spec.ok()) << c.file << ": " << spec.error().message;
    ASSERT_TRUE(spec->has_value()) << c.file;
    auto g = grammar::Grammar::parse((*spec)->gbnf);
    ASSERT_TRUE(g.ok()) << c.file << ": " << g.error().message;
    const auto grammar = std::make_shared<const grammar::Grammar>(std::move(*g));
    auto accepts = [&](const json& calls) {
      grammar::GrammarMatcher m(grammar);
      const std::string text = format_calls(s, tool_calls_of(calls, s));
      for (size_t i = 0; i < text.size(); ++i) {
        if (!m.accept_token(-1, text.substr(i, 1)).ok()) return false;
      }
      return m.complete();
    };
    EXPECT_TRUE(accepts(call("add_item", {{"item", {{"name", "x"}}}}))) << c.file << "\n" << (*spec)->gbnf;
    EXPECT_TRUE(accepts(call("set_count", {{"item", 3}}))) << c.file << "\n" << (*spec)->gbnf;
    EXPECT_FALSE(accepts(call("set_count", {{"item", {{"name", "x"}}}}))) << c.file << "\n" << (*spec)->gbnf;
    EXPECT_FALSE(accepts(call("add_item", {{"item", 3}}))) << c.file << "\n" << (*spec)->gbnf;
  }
}

TEST(ToolCalls, PromptsRenderTheTools) {
  const auto tools = tool_defs();
  for (const FamilyCase& c : kFamilies) {
    const ChatTemplate t = load_template(c.file);
    const ChatSyntax s = detect_chat_syntax(t);
    ChatRequest r;
    r.messages = {message("user", "Weather in Paris?")};
    r.tools = tools;
    auto plan = plan_chat(t, s, r);
    ASSERT_TRUE(plan.ok()) << c.file << ": " << plan.error().message;
    // The tools reach the model: through the template, or (generic format) kiln's system text.
    EXPECT_NE(plan->prompt.find("get_weather"), std::string::npos) << c.file;
    EXPECT_TRUE(plan->parser.parse_tool_calls);
  }
}

}  // namespace
}  // namespace kiln::chat
