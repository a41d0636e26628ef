#include "text/chat/tools.h"

#include <map>

#include "text/chat/gbnf_text.h"
#include "text/chat/text_util.h"
#include "text/grammar/json_schema.h"

namespace kiln::chat {
namespace {

using json = nlohmann::ordered_json;

std::string json_literal(const std::string& s) { return grammar::gbnf_literal(json(s).dump()); }

// A marker as a literal, the whitespace around it optional (`space`); "" when it is all whitespace.
std::string marker(std::string_view m) {
  const std::string t = trim(m);
  return t.empty() ? "" : "space " + grammar::gbnf_literal(t) + " ";
}

// Whether a parameter's schema is a plain string (written raw between tags, not as JSON).
bool is_plain_string(const json& schema) {
  if (!schema.is_object() || !schema.contains("type") || schema["type"] != "string") return false;
  for (const auto& [k, v] : schema.items()) {
    if (k != "type" && k != "description" && k != "title" && k != "enum" && k != "default" && k != "examples") return false;
  }
  return true;
}

class ToolGrammar {
 public:
  ToolGrammar(const ChatSyntax& s, const ToolGrammarOptions& o) : s_(s), t_(s.tools), o_(o) {}

  Result<grammar::GrammarSpec> build() {
    std::vector<std::string> alternatives;
    for (const ToolDef& tool : *o_.tools) {
      if (o_.choice.mode == ToolChoice::Mode::Named && tool.name != o_.choice.name) continue;
      KILN_ASSIGN_OR_RETURN(std::string call, call_rule(tool));
      alternatives.push_back(c_.add_rule("tool-" + tool.name, call));
    }
    std::string any_call;
    for (size_t i = 0; i < alternatives.size(); ++i) any_call += (i ? " | " : "") + alternatives[i];
    const std::string call = c_.add_rule("tool-call", any_call);
    std::string calls;
    if (t_.shape == ToolSyntax::Shape::JsonObjects && t_.array) {
      calls = "\"[\" space " + call + (o_.parallel ? " (\",\" space " + call + ")*" : "") + " space \"]\"";
    } else {
      const std::string wrapped = c_.add_rule("tool-call-wrapped", marker(t_.call_start) + "space " + call + " space " + marker(t_.call_end));
      calls = wrapped + (o_.parallel ? " (space " + marker(t_.call_separator) + wrapped + ")*" : "");
    }
    const std::string section = c_.add_rule("tool-calls", marker(t_.section_start) + "space " + calls + " space " + marker(t_.section_end));

    const bool lazy = o_.choice.mode == ToolChoice::Mode::Auto;
    grammar::GrammarSpec spec;
    spec.lazy = lazy;
    if (lazy) {
      c_.add_rule("root", section + " space");
      spec.triggers.push_back(trigger());
    } else {
      c_.add_rule("root", reasoning_prefix() + section + " space");
    }
    spec.gbnf = c_.grammar();
    return spec;
  }

 private:
  // The reasoning a model may write before its calls (before a required call).
  std::string reasoning_prefix() {
    if (!s_.reasoning.supported()) return "";
    const std::string body = until_rule(c_, "reasoning-body", s_.reasoning.end);
    const std::string end = grammar::gbnf_literal(s_.reasoning.end);
    if (o_.starts_in_reasoning) return body + " " + end + " space ";
    std::string rule = "(";  // appended: GCC 12's false -Wrestrict on "x" + std::string&& (bug 105329)
    rule += grammar::gbnf_literal(s_.reasoning.start);
    rule += " " + body + " " + end + " space)? ";
    return rule;
  }

  grammar::Trigger trigger() {
    const std::string word = trim(t_.trigger);
    if (!s_.reasoning.supported()) return {.type = grammar::Trigger::Type::Word, .value = word};
    // A marker inside the reasoning block does not start the calls: the pattern needs the block
    // closed (or never opened) first, and the grammar takes the text from the marker on.
    const std::string start = regex_escape(s_.reasoning.start), end = regex_escape(s_.reasoning.end);
    std::string pattern = o_.starts_in_reasoning
                              ? "[\\s\\S]*?" + end
                              : "(?:\\s*" + start + "[\\s\\S]*?" + end + "|(?!\\s*" + start + "))";
    pattern += "[\\s\\S]*?(" + regex_escape(word) + ")[\\s\\S]*";
    return {.type = grammar::Trigger::Type::PatternFull, .value = pattern};
  }

  Result<std::string> args_rule(const ToolDef& tool) { return c_.add_schema("tool-" + tool.name + "-args", tool.parameters); }

  Result<std::string> id_rule() {
    switch (t_.ids) {
      case ToolSyntax::Ids::Alnum9: return std::string("[a-zA-Z0-9]{9}");
      case ToolSyntax::Ids::Index: return std::string("[0-9]{1,3}");
      case ToolSyntax::Ids::Random: return std::string("[a-zA-Z0-9_-]{1,40}");
    }
    return std::string();
  }

  Result<std::string> call_rule(const ToolDef& tool) {
    switch (t_.shape) {
      case ToolSyntax::Shape::JsonObjects: {
        KILN_ASSIGN_OR_RETURN(const std::string args, args_rule(tool));
        KILN_ASSIGN_OR_RETURN(const std::string id, id_rule());
        const std::string id_kv =
            t_.id_key.empty() ? "" : json_literal(t_.id_key) + " space \":\" space \"\\\"\" " + id + " \"\\\"\"";
        std::string body = "\"{\" space ";
        if (!id_kv.empty() && t_.id_first) body += id_kv + " \",\" space ";
        body += json_literal(t_.name_key) + " space \":\" space " + json_literal(tool.name) +
                " space \",\" space " + json_literal(t_.args_key) + " space \":\" space " + args;
        if (!id_kv.empty() && !t_.id_first) body += " \",\" space " + id_kv;
        return body + " space \"}\"";
      }
      case ToolSyntax::Shape::NameThenJson: {
        KILN_ASSIGN_OR_RETURN(const std::string args, args_rule(tool));
        KILN_ASSIGN_OR_RETURN(const std::string id, id_rule());
        std::string body = marker(t_.name_prefix) + grammar::gbnf_literal(tool.name) + " " + marker(t_.name_suffix);
        if (!t_.id_prefix.empty()) body += marker(t_.id_prefix) + id + " ";
        return body + marker(t_.args_prefix) + "space " + args + " space " + marker(t_.args_suffix);
      }
      case ToolSyntax::Shape::TaggedArgs: return tagged_call(tool);
      case ToolSyntax::Shape::Generic: break;
    }
    return make_error("tool grammar: no call syntax");
  }

  Result<std::string> tagged_call(const ToolDef& tool) {
    const json& params = tool.parameters;
    std::vector<std::string> required_args, optional_args;
    std::vector<std::string> required_names;
    if (params.contains("required") && params["required"].is_array()) {
      for (const auto& r : params["required"]) {
        if (r.is_string()) required_names.push_back(r.get<std::string>());
      }
    }
    if (params.contains("properties") && params["properties"].is_object()) {
      for (const auto& [name, schema] : params["properties"].items()) {
        std::string value;
        if (is_plain_string(schema) && schema.contains("enum") && schema["enum"].is_array()) {
          for (const auto& v : schema["enum"]) {
            if (!v.is_string()) return make_error("tools: '", tool.name, "': enum values of a string parameter must be strings");
            value += (value.empty() ? "(" : " | ") + grammar::gbnf_literal(v.get<std::string>());
          }
          value += ")";
        } else if (is_plain_string(schema)) {
          value = until_rule(c_, "tool-arg-text", trim(t_.arg_suffix));
        } else {
          KILN_ASSIGN_OR_RETURN(value, c_.add_schema("tool-" + tool.name + "-arg-" + name, schema, {.root = &params}));
        }
        const std::string arg = c_.add_rule("tool-" + tool.name + "-arg-" + name,
                                            marker(t_.arg_prefix) + grammar::gbnf_literal(name) + " " + marker(t_.arg_infix) +
                                                "space " + value + " space " + marker(t_.arg_suffix));
        const bool required = std::find(required_names.begin(), required_names.end(), name) != required_names.end();
        (required ? required_args : optional_args).push_back(arg);
      }
    }
    std::string body = marker(t_.name_prefix) + grammar::gbnf_literal(tool.name) + " " + marker(t_.name_suffix);
    for (const std::string& a : required_args) body += "space " + a + " ";
    for (const std::string& a : optional_args) body += "(space " + a + ")? ";
    return body + "space " + marker(t_.args_suffix);
  }

  const ChatSyntax& s_;
  const ToolSyntax& t_;
  const ToolGrammarOptions& o_;
  grammar::SchemaConverter c_;
};

json generic_call_schema(const ToolDef& tool) {
  return {{"type", "object"},
          {"properties", {{"name", {{"const", tool.name}}}, {"arguments", tool.parameters}}},
          {"required", {"name", "arguments"}}};
}

}  // namespace

Result<std::vector<ToolDef>> tools_from_json(const json& tools) {
  if (!tools.is_array()) return make_error("tools: expected an array, got ", tools.type_name());
  std::vector<ToolDef> out;
  for (size_t i = 0; i < tools.size(); ++i) {
    const json& t = tools[i];
    const std::string where = "tools[" + std::to_string(i) + "]";
    if (!t.is_object()) return make_error(where, ": expected an object");
    if (!t.contains("type") || t["type"] != "function") return make_error(where, ".type: only \"function\" is supported");
    if (!t.contains("function") || !t["function"].is_object()) return make_error(where, ".function: missing");
    const json& f = t["function"];
    if (!f.contains("name") || !f["name"].is_string() || f["name"].get<std::string>().empty())
      return make_error(where, ".function.name: missing");
    ToolDef d;
    d.name = f["name"].get<std::string>();
    for (const ToolDef& other : out) {
      if (other.name == d.name) return make_error(where, ".function.name: '", d.name, "' is defined twice");
    }
    if (f.contains("description")) {
      if (!f["description"].is_string()) return make_error(where, ".function.description: expected a string");
      d.description = f["description"].get<std::string>();
    }
    if (f.contains("parameters") && !f["parameters"].is_null()) {
      if (!f["parameters"].is_object()) return make_error(where, ".function.parameters: expected a JSON schema object");
      d.parameters = f["parameters"];
    }
    // A function without parameters takes none (ref: llama.cpp common_chat_tool_parameters).
    if (d.parameters.empty()) d.parameters = {{"type", "object"}, {"properties", json::object()}};
    d.json = t;
    out.push_back(std::move(d));
  }
  return out;
}

Result<ToolChoice> tool_choice_from_json(const json& choice, const std::vector<ToolDef>& tools) {
  if (choice.is_null()) return ToolChoice{};
  if (choice.is_string()) {
    const std::string c = choice.get<std::string>();
    if (c == "auto") return ToolChoice{};
    if (c == "none") return ToolChoice{ToolChoice::Mode::None, ""};
    if (c == "required") return ToolChoice{ToolChoice::Mode::Required, ""};
    return make_error("tool_choice: '", c, "' is not auto, none, required or a function");
  }
  if (!choice.is_object() || !choice.contains("function") || !choice["function"].is_object() ||
      !choice["function"].contains("name") || !choice["function"]["name"].is_string())
    return make_error("tool_choice: expected \"auto\", \"none\", \"required\" or {\"type\": \"function\", \"function\": {\"name\": ...}}");
  const std::string name = choice["function"]["name"].get<std::string>();
  for (const ToolDef& t : tools) {
    if (t.name == name) return ToolChoice{ToolChoice::Mode::Named, name};
  }
  return make_error("tool_choice: function '", name, "' is not among the tools");
}

Result<std::optional<grammar::GrammarSpec>> tool_call_grammar(const ChatSyntax& syntax, const ToolGrammarOptions& options) {
  KILN_ASSERT(options.tools != nullptr, "tool_call_grammar: no tools");
  if (options.choice.mode == ToolChoice::Mode::None || options.tools->empty()) return std::optional<grammar::GrammarSpec>();
  if (syntax.tools.shape == ToolSyntax::Shape::Generic) {
    json alternatives = json::array();
    for (const ToolDef& t : *options.tools) {
      if (options.choice.mode != ToolChoice::Mode::Named || t.name == options.choice.name)
        alternatives.push_back(generic_call_schema(t));
    }
    const json one_call = alternatives.size() == 1 ? alternatives[0] : json{{"anyOf", alternatives}};
    json calls = options.parallel
                     ? json{{"type", "object"},
                            {"properties", {{"tool_calls", {{"type", "array"}, {"items", one_call}, {"minItems", 1}}}}},
                            {"required", {"tool_calls"}}}
                     : json{{"type", "object"}, {"properties", {{"tool_call", one_call}}}, {"required", {"tool_call"}}};
    const json response = {{"type", "object"}, {"properties", {{"response", {{"type", "string"}}}}}, {"required", {"response"}}};
    const json schema = options.choice.mode == ToolChoice::Mode::Auto ? json{{"anyOf", {calls, response}}} : calls;
    // Each tool's parameters where they stand in `schema`: their $refs resolve against them.
    const json& calls_in = options.choice.mode == ToolChoice::Mode::Auto ? schema["anyOf"][0] : schema;
    const json& one_in = options.parallel ? calls_in["properties"]["tool_calls"]["items"] : calls_in["properties"]["tool_call"];
    grammar::SchemaDocuments documents;
    for (size_t i = 0; i < alternatives.size(); ++i)
      documents.embedded.push_back(&(alternatives.size() == 1 ? one_in : one_in["anyOf"][i])["properties"]["arguments"]);
    grammar::SchemaConverter c;
    KILN_TRY(c.add_schema("", schema, documents));
    return std::optional<grammar::GrammarSpec>(grammar::GrammarSpec{.gbnf = c.grammar(), .lazy = false, .triggers = {}});
  }
  if (options.choice.mode == ToolChoice::Mode::Auto && trim(syntax.tools.trigger).empty()) return std::optional<grammar::GrammarSpec>();
  KILN_ASSIGN_OR_RETURN(grammar::GrammarSpec spec, ToolGrammar(syntax, options).build());
  return std::optional<grammar::GrammarSpec>(std::move(spec));
}

std::string format_calls(const ChatSyntax& syntax, const std::vector<ToolCall>& calls) {
  const ToolSyntax& t = syntax.tools;
  auto args_of = [](const ToolCall& c) {
    json a = json::parse(c.arguments, nullptr, false);
    return a.is_discarded() ? json::object() : a;
  };
  if (t.shape == ToolSyntax::Shape::Generic) {
    json list = json::array();
    for (const ToolCall& c : calls) list.push_back({{"name", c.name}, {"arguments", args_of(c)}});
    return (list.size() == 1 ? json{{"tool_call", list[0]}} : json{{"tool_calls", list}}).dump();
  }
  std::string out = t.section_start + (t.shape == ToolSyntax::Shape::JsonObjects && t.array ? "[" : "");
  for (size_t i = 0; i < calls.size(); ++i) {
    const ToolCall& c = calls[i];
    if (i > 0) out += t.shape == ToolSyntax::Shape::JsonObjects && t.array ? ", " : t.call_separator;
    if (!(t.shape == ToolSyntax::Shape::JsonObjects && t.array)) out += t.call_start;
    switch (t.shape) {
      case ToolSyntax::Shape::JsonObjects: {
        json o = json::object();
        if (!t.id_key.empty() && t.id_first) o[t.id_key] = c.id;
        o[t.name_key] = c.name;
        o[t.args_key] = args_of(c);
        if (!t.id_key.empty() && !t.id_first) o[t.id_key] = c.id;
        out += o.dump();
        break;
      }
      case ToolSyntax::Shape::NameThenJson:
        out += t.name_prefix + c.name + t.name_suffix;
        if (!t.id_prefix.empty()) out += t.id_prefix + c.id;
        out += t.args_prefix + args_of(c).dump() + t.args_suffix;
        break;
      case ToolSyntax::Shape::TaggedArgs: {
        out += t.name_prefix + c.name + t.name_suffix;
        const json args = args_of(c);  // items() must not outlive it
        for (const auto& [k, v] : args.items())
          out += t.arg_prefix + k + t.arg_infix + (v.is_string() ? v.get<std::string>() : v.dump()) + t.arg_suffix;
        out += t.args_suffix;
        break;
      }
      case ToolSyntax::Shape::Generic: break;
    }
    if (!(t.shape == ToolSyntax::Shape::JsonObjects && t.array)) out += t.call_end;
  }
  return out + (t.shape == ToolSyntax::Shape::JsonObjects && t.array ? "]" : "") + t.section_end;
}

std::string describe_tools(const ChatSyntax& syntax, const std::vector<ToolDef>& tools, bool parallel) {
  json list = json::array();
  for (const ToolDef& t : tools) {
    json d = {{"name", t.name}};
    if (!t.description.empty()) d["description"] = t.description;
    d["parameters"] = t.parameters;
    list.push_back(d);
  }
  std::string text = "You can call these tools (their parameters are JSON schemas):\n" + list.dump(2) + "\n\n";
  if (syntax.tools.shape == ToolSyntax::Shape::Generic) {
    text += "Answer with one JSON object: ";
    text += parallel ? "{\"tool_calls\": [{\"name\": \"<tool>\", \"arguments\": {...}}, ...]} to call tools"
                     : "{\"tool_call\": {\"name\": \"<tool>\", \"arguments\": {...}}} to call a tool";
    return text + ", or {\"response\": \"<your answer>\"} to answer directly.";
  }
  // An example call of the first tool, its required parameters filled with placeholders.
  const ToolDef& first = tools.front();
  json args = json::object();
  if (first.parameters.contains("required") && first.parameters.contains("properties")) {
    for (const auto& r : first.parameters["required"]) {
      if (!r.is_string() || !first.parameters["properties"].contains(r.get<std::string>())) continue;
      const json& p = first.parameters["properties"][r.get<std::string>()];
      const std::string type = p.is_object() && p.contains("type") && p["type"].is_string() ? p["type"].get<std::string>() : "";
      args[r.get<std::string>()] = type == "integer" || type == "number" ? json(0) : type == "boolean" ? json(false) : json("...");
    }
  }
  return text + "To call a tool, write:\n" + format_calls(syntax, {{"call_1", first.name, args.dump()}});
}

}  // namespace kiln::chat
