#include "text/chat/chat_plan.h"

#include "text/chat/gbnf_text.h"
#include "text/chat/text_util.h"
#include "text/grammar/json_schema.h"
#include "text/json_depth.h"

namespace kiln::chat {
namespace {

using json = nlohmann::ordered_json;

// The messages as this template wants them: call arguments as objects or strings; for the
// generic format, calls and results written as text the model can read.
Result<std::vector<ChatMessage>> prepare_messages(const ChatSyntax& syntax, const ChatRequest& r) {
  std::vector<ChatMessage> out;
  const bool generic = syntax.tools.shape == ToolSyntax::Shape::Generic && !r.tools.empty();
  const bool describe = !r.tools.empty() && (generic || !syntax.renders_tools);
  // Calls and results as text for the generic format and for templates that render no tools
  // (they would read an assistant call's null content), as llama.cpp's template polyfills do.
  const bool calls_as_text = generic || !syntax.renders_tools;
  for (size_t i = 0; i < r.messages.size(); ++i) {
    ChatMessage m = r.messages[i];
    if (m.extra.contains("tool_calls") && m.extra["tool_calls"].is_array()) {
      json& calls = m.extra["tool_calls"];
      for (size_t j = 0; j < calls.size(); ++j) {
        json& f = calls[j]["function"];
        if (!f.is_object() || !f.contains("name"))
          return make_error("messages[", i, "].tool_calls[", j, "]: expected {\"function\": {\"name\", \"arguments\"}}");
        json& args = f["arguments"];
        if (args.is_string() && syntax.object_arguments) {
          if (text::json_nests_deeper_than(args.get<std::string>(), text::kMaxJsonDepth))
            return make_error("messages[", i, "].tool_calls[", j, "].function.arguments: nests arrays and objects deeper than ",
                              text::kMaxJsonDepth, " levels");
          json parsed = json::parse(args.get<std::string>(), nullptr, false);
          if (parsed.is_discarded())
            return make_error("messages[", i, "].tool_calls[", j, "].function.arguments: not JSON");
          args = std::move(parsed);
        } else if (!args.is_string() && !syntax.object_arguments) {
          args = args.dump();
        }
      }
      if (calls_as_text) {
        json text_calls = json::array();
        for (const auto& c : calls) text_calls.push_back({{"name", c["function"]["name"]}, {"arguments", c["function"]["arguments"]}});
        const json answer = text_calls.size() == 1 ? json{{"tool_call", text_calls[0]}} : json{{"tool_calls", text_calls}};
        m.content = answer.dump();
        m.extra.erase("tool_calls");
        m.extra.erase("content");  // a null content
      }
    }
    if (calls_as_text && m.role == "tool") {
      m.role = "user";
      m.content = "Tool result" + (m.extra.contains("name") && m.extra["name"].is_string() ? " (" + m.extra["name"].get<std::string>() + ")" : std::string()) +
                  ": " + m.content;
    }
    out.push_back(std::move(m));
  }
  if (describe) {
    const std::string tools_text = describe_tools(syntax, r.tools, r.parallel_tool_calls && syntax.parallel_calls);
    if (!out.empty() && out[0].role == "system") {
      out[0].content += "\n\n" + tools_text;
    } else {
      ChatMessage system;
      system.role = "system";
      system.content = tools_text;
      out.insert(out.begin(), std::move(system));
    }
  }
  return out;
}

// The response-format grammar, after the reasoning block the model may write first (none when the
// generation prompt closed the block: thinking is off).
Result<std::string> schema_grammar(const ChatSyntax& syntax, const json& schema, bool starts_in_reasoning,
                                   bool reasoning_closed) {
  if (!syntax.reasoning.supported() || reasoning_closed) return grammar::json_schema_to_gbnf(schema);
  grammar::SchemaConverter c;
  KILN_ASSIGN_OR_RETURN(const std::string response, c.add_schema("response", schema));
  const std::string body = until_rule(c, "reasoning-body", syntax.reasoning.end);
  const std::string end = grammar::gbnf_literal(syntax.reasoning.end);
  const std::string prefix = starts_in_reasoning
                                 ? body + " " + end + " space "
                                 : "(" + grammar::gbnf_literal(syntax.reasoning.start) + " " + body + " " + end + " space)? ";
  c.add_rule("root", prefix + response);
  return c.grammar();
}

}  // namespace

std::string generation_prompt_text(std::string_view without, std::string_view with) {
  size_t common = 0;
  while (common < without.size() && common < with.size() && without[common] == with[common]) ++common;
  return std::string(with.substr(common));
}

Result<ChatPlan> plan_chat(const ChatTemplate& tmpl, const ChatSyntax& syntax, const ChatRequest& r) {
  const bool use_tools = !r.tools.empty() && r.tool_choice.mode != ToolChoice::Mode::None;
  if (use_tools && !r.grammar.empty()) return make_error("tools: a grammar cannot be combined with tools");
  if (use_tools && r.json_schema) return make_error("tools: response_format cannot be combined with tools");
  if (!r.grammar.empty() && r.json_schema) return make_error("grammar: give a grammar or a JSON schema, not both");
  if (!r.template_kwargs.is_object()) return make_error("chat_template_kwargs: expected an object");

  KILN_ASSIGN_OR_RETURN(std::vector<ChatMessage> messages, prepare_messages(syntax, r));
  ChatRenderOptions o;
  o.messages = std::move(messages);
  o.bos_token = r.bos_token;
  o.eos_token = r.eos_token;
  o.clock = r.clock;
  o.extra_context = r.template_kwargs;
  if (!r.tools.empty() && syntax.tools.shape != ToolSyntax::Shape::Generic) {
    json tools = json::array();
    for (const ToolDef& t : r.tools) tools.push_back(t.json);
    o.extra_context["tools"] = tools;
  }
  if (r.enable_thinking) o.extra_context["enable_thinking"] = *r.enable_thinking;

  ChatPlan plan;
  o.add_generation_prompt = false;
  KILN_ASSIGN_OR_RETURN(const std::string without, tmpl.render(o));
  o.add_generation_prompt = true;
  KILN_ASSIGN_OR_RETURN(plan.prompt, tmpl.render(o));
  plan.generation_prompt = generation_prompt_text(without, plan.prompt);
  if (!r.add_generation_prompt) plan.prompt = without;

  const ReasoningSyntax& rs = syntax.reasoning;
  const std::string gen = trim(plan.generation_prompt);
  auto gen_ends_with = [&](const std::string& tag) {
    const std::string t = trim(tag);
    return !t.empty() && gen.size() >= t.size() && gen.compare(gen.size() - t.size(), std::string::npos, t) == 0;
  };
  const bool starts_in_reasoning = rs.supported() && gen_ends_with(rs.start);
  const bool reasoning_closed = rs.supported() && gen_ends_with(rs.end);  // "<think>\n\n</think>": thinking off

  if (!r.grammar.empty()) {
    plan.grammar = grammar::GrammarSpec{.gbnf = r.grammar, .lazy = false, .triggers = {}};
    plan.grammar_from_request = true;
  } else if (r.json_schema) {
    KILN_ASSIGN_OR_RETURN(std::string gbnf, schema_grammar(syntax, *r.json_schema, starts_in_reasoning, reasoning_closed));
    plan.grammar = grammar::GrammarSpec{.gbnf = std::move(gbnf), .lazy = false, .triggers = {}};
  } else if (use_tools) {
    KILN_ASSIGN_OR_RETURN(plan.grammar, tool_call_grammar(syntax, {.tools = &r.tools,
                                                                   .choice = r.tool_choice,
                                                                   .parallel = r.parallel_tool_calls && syntax.parallel_calls,
                                                                   .starts_in_reasoning = starts_in_reasoning}));
  }

  plan.parser.syntax = syntax;
  plan.parser.reasoning_format = r.reasoning_format;
  plan.parser.starts_in_reasoning = starts_in_reasoning;
  if (starts_in_reasoning) plan.parser.opened_reasoning = plan.generation_prompt.substr(plan.generation_prompt.rfind(trim(rs.start)));
  plan.parser.parse_tool_calls = use_tools;
  plan.parser.tools = r.tools;
  plan.preserved_tokens = syntax.preserved_tokens;
  if (rs.supported()) {
    plan.reasoning_start = trim(rs.start);
    plan.reasoning_end = trim(rs.end);
    for (const std::string& tag : {plan.reasoning_start, plan.reasoning_end}) {
      if (!tag.empty() && std::find(plan.preserved_tokens.begin(), plan.preserved_tokens.end(), tag) == plan.preserved_tokens.end())
        plan.preserved_tokens.push_back(tag);
    }
  }
  return plan;
}

}  // namespace kiln::chat
