// Structured output and tool calls through the HTTP server (in-process, loopback, the qwen2
// fixture): grammar and json_schema on /completion and /v1/completions, response_format on the
// chat route, tools with tool_choice required / named / auto / none over several chat-template
// families (the template given as the server's --chat-template), the same calls streamed as
// delta.tool_calls, tool results in the conversation, and the 400s for what kiln refuses.
#include <gtest/gtest.h>

#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>

#include "chat/chat_test_util.h"
#include "http_client.h"
#include "serve/server.h"
#include "text/grammar/gbnf.h"
#include "text/grammar/grammar_matcher.h"
#include "test_data.h"

namespace kiln::serve {
namespace {

using nlohmann::json;

std::shared_ptr<const Model> model() {
  static auto m = Model::load(test_data::path("models/qwen2-e64-Q8_0.gguf"));
  EXPECT_TRUE(m.ok()) << (m.ok() ? "" : m.error().message);
  return *m;
}

std::string read_template(const std::string& name) {
  std::ifstream in(chat::testing::template_path(name), std::ios::binary);
  EXPECT_TRUE(in.good()) << name;
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// A server on a free loopback port with `template_source` (empty: the model's), stopped when
// the object goes.
class TestServer {
 public:
  explicit TestServer(const std::string& template_source = "") {
    ServerOptions o;
    o.n_parallel = 2;
    o.queue_limit = 4;
    o.n_threads = 2;
    o.context.n_ctx = 4096;  // 2048 per slot: Command R7B's tool prompt is ~1400 tokens
    o.chat_template_source = template_source;
    server_ = std::make_unique<Server>(o);
    auto port = server_->listen("127.0.0.1", 0);
    EXPECT_TRUE(port.ok());
    port_ = port.ok() ? *port : 0;
    auto attached = server_->attach(model());
    EXPECT_TRUE(attached.ok()) << (attached.ok() ? "" : attached.error().message);
  }
  ~TestServer() { server_->stop(); }

  // `body`: a json, or an ordered_json where the order of keys matters (a schema's properties).
  template <class Json = json>
  httplib::Result post(const std::string& path, const Json& body) const {
    httplib::Client c("127.0.0.1", port_);
    c.set_read_timeout(120);
    return c.Post(path.c_str(), body.dump(), "application/json");
  }
  template <class Json = json>
  json ok(const std::string& path, const Json& body) const {
    auto r = post(path, body);
    EXPECT_TRUE(r);
    if (!r) return json();
    EXPECT_EQ(r->status, 200) << r->body;
    return json::parse(r->body);
  }
  // The SSE events of a streaming request, "[DONE]" left out.
  std::vector<json> stream(const std::string& path, json body) const {
    body["stream"] = true;
    auto r = post(path, body);
    EXPECT_TRUE(r);
    std::vector<json> events;
    if (!r) return events;
    EXPECT_EQ(r->status, 200) << r->body;
    for (size_t at = 0; (at = r->body.find("data: ", at)) != std::string::npos;) {
      const size_t end = r->body.find("\n\n", at);
      const std::string data = r->body.substr(at + 6, end - at - 6);
      if (data != "[DONE]") events.push_back(json::parse(data));
      at = end;
    }
    return events;
  }
  // The 400 of a request, its message in OpenAI's error shape.
  std::string refusal(const std::string& path, const json& body) const {
    auto r = post(path, body);
    EXPECT_TRUE(r);
    if (!r) return "";
    EXPECT_EQ(r->status, 400) << body.dump() << " -> " << r->body;
    const json j = json::parse(r->body);
    EXPECT_EQ(j["error"]["code"], 400);
    EXPECT_EQ(j["error"]["type"], "invalid_request_error");
    return j["error"]["message"].get<std::string>();
  }

 private:
  std::unique_ptr<Server> server_;
  int port_ = 0;
};

// Whether `text` is a whole sentence of the GBNF grammar (an independent check: the matcher
// alone, no vocabulary or sampler).
bool in_grammar(const std::string& gbnf, const std::string& text) {
  auto g = grammar::Grammar::parse(gbnf);
  EXPECT_TRUE(g.ok());
  if (!g.ok()) return false;
  grammar::GrammarMatcher m(std::make_shared<const grammar::Grammar>(std::move(*g)));
  for (char c : text) {
    if (!m.accept_token(-1, std::string(1, c)).ok()) return false;
  }
  return m.complete();
}

json user(const std::string& text) { return {{"role", "user"}, {"content", text}}; }

json weather_tool() {
  return json::parse(
      R"({"type": "function", "function": {"name": "get_weather", "description": "Weather in a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string", "enum": ["Paris", "Rome", "Oslo"]},
    "days": {"type": "integer", "minimum": 1, "maximum": 7}}, "required": ["city", "days"], "additionalProperties": false}}})");
}
json time_tool() {
  return json::parse(R"({"type": "function", "function": {"name": "get_time", "description": "Time in a zone",
    "parameters": {"type": "object", "properties": {"zone": {"type": "string", "enum": ["UTC", "CET"]}},
    "required": ["zone"], "additionalProperties": false}}})");
}

// The arguments of a get_weather / get_time call hold exactly what the tool's parameters allow.
void expect_valid_arguments(const std::string& name, const std::string& arguments) {
  const json a = json::parse(arguments, nullptr, false);
  ASSERT_TRUE(a.is_object()) << arguments;
  if (name == "get_weather") {
    EXPECT_EQ(a.size(), 2u) << arguments;
    ASSERT_TRUE(a.contains("city") && a["city"].is_string()) << arguments;
    const std::string city = a["city"];
    EXPECT_TRUE(city == "Paris" || city == "Rome" || city == "Oslo") << arguments;
    ASSERT_TRUE(a.contains("days") && a["days"].is_number_integer()) << arguments;
    EXPECT_GE(a["days"].get<int>(), 1);
    EXPECT_LE(a["days"].get<int>(), 7);
  } else {
    ASSERT_EQ(name, "get_time");
    EXPECT_EQ(a.size(), 1u) << arguments;
    EXPECT_TRUE(a["zone"] == "UTC" || a["zone"] == "CET") << arguments;
  }
}

// name + arguments of each streamed call, put together from the deltas.
std::vector<std::pair<std::string, std::string>> streamed_calls(const std::vector<json>& events,
                                                                std::string& finish) {
  std::vector<std::pair<std::string, std::string>> calls;
  for (const json& e : events) {
    for (const json& c : e["choices"]) {
      if (!c["finish_reason"].is_null()) finish = c["finish_reason"].get<std::string>();
      if (!c["delta"].contains("tool_calls")) continue;
      for (const json& t : c["delta"]["tool_calls"]) {
        const size_t i = t["index"];
        if (i == calls.size()) {
          EXPECT_TRUE(t["id"].is_string() && !t["id"].get<std::string>().empty()) << t.dump();
          EXPECT_EQ(t["type"], "function");
          calls.emplace_back(t["function"]["name"].get<std::string>(), "");
        }
        if (i >= calls.size()) {
          ADD_FAILURE() << "call index " << i << " before its first delta: " << t.dump();
          return calls;
        }
        calls[i].second += t["function"]["arguments"].get<std::string>();
      }
    }
  }
  return calls;
}

// Template families whose tool-call syntax kiln writes and reads.
const char* const kFamilyTemplates[] = {
    "Qwen-Qwen2.5-7B-Instruct.jinja",                       // hermes <tool_call>
    "meta-llama-Llama-3.1-8B-Instruct.jinja",               // llama 3.x bare JSON
    "mistralai-Mistral-Nemo-Instruct-2407.jinja",           // [TOOL_CALLS] [...]
    "meetkai-functionary-medium-v3.1.jinja",                // <function=name>
    "CohereForAI-c4ai-command-r7b-12-2024-tool_use.jinja",  // <|START_ACTION|>
    "ibm-granite-granite-3.3-2B-Instruct.jinja",            // <|tool_call|>
};

TEST(StructuredServer, RequiredToolCallsAreWellFormedInEveryFamily) {
  for (const char* file : kFamilyTemplates) {
    SCOPED_TRACE(file);
    TestServer s(read_template(file));
    const json body = {{"messages", {user("What is the weather in Paris?")}},
                       {"tools", {weather_tool(), time_tool()}},
                       {"tool_choice", "required"},
                       {"temperature", 0},
                       {"cache_prompt", false},
                       {"max_tokens", 200}};
    const json j = s.ok("/v1/chat/completions", body);
    const json& choice = j["choices"][0];
    EXPECT_EQ(choice["finish_reason"], "tool_calls") << j.dump();
    const json& calls = choice["message"]["tool_calls"];
    ASSERT_TRUE(calls.is_array() && calls.size() == 1) << j.dump();
    EXPECT_TRUE(calls[0]["id"].is_string() && !calls[0]["id"].get<std::string>().empty());
    EXPECT_EQ(calls[0]["type"], "function");
    const std::string name = calls[0]["function"]["name"];
    const std::string arguments = calls[0]["function"]["arguments"];
    expect_valid_arguments(name, arguments);

    // Streamed, greedy: the same call.
    std::string finish;
    const auto streamed = streamed_calls(s.stream("/v1/chat/completions", body), finish);
    EXPECT_EQ(finish, "tool_calls");
    ASSERT_EQ(streamed.size(), 1u);
    EXPECT_EQ(streamed[0].first, name);
    EXPECT_EQ(json::parse(streamed[0].second), json::parse(arguments));

    // Sampled: still well-formed.
    json sampled = body;
    sampled["temperature"] = 1.0;
    sampled["seed"] = 7;
    const json js = s.ok("/v1/chat/completions", sampled);
    const json& sc = js["choices"][0]["message"]["tool_calls"];
    ASSERT_TRUE(sc.is_array() && sc.size() == 1) << js.dump();
    expect_valid_arguments(sc[0]["function"]["name"].get<std::string>(),
                           sc[0]["function"]["arguments"].get<std::string>());
  }
}

// Issue 32: Hermes 3's tool template looked a property's "type" up in a map, and a property with
// only an enum (common in real tools) made every request a 400 ("cannot index object with
// undefined"). It renders as Jinja2 does (tests/template/tool_cases_test.cpp), and the call
// validates: `unit` is one of its enum's values.
TEST(StructuredServer, HermesTemplateTakesAPropertyWithOnlyAnEnum) {
  std::ifstream in(KILN_SOURCE_DIR
                   "/tests/template/data/llama_cpp/NousResearch-Hermes-3-Llama-3.1-8B-tool_use.jinja",
                   std::ios::binary);
  ASSERT_TRUE(in.good());
  std::ostringstream source;
  source << in.rdbuf();
  TestServer s(source.str());
  const json tool =
      json::parse(R"({"type": "function", "function": {"name": "convert", "description": "Convert",
    "parameters": {"type": "object", "properties": {"unit": {"enum": ["c", "f"]}}, "required": ["unit"],
    "additionalProperties": false}}})");
  const json j = s.ok("/v1/chat/completions", {{"messages", {user("Convert 20 degrees")}},
                                               {"tools", {tool}},
                                               {"tool_choice", "required"},
                                               {"temperature", 0},
                                               {"max_tokens", 100}});
  const json& calls = j["choices"][0]["message"]["tool_calls"];
  ASSERT_TRUE(calls.is_array() && calls.size() == 1) << j.dump();
  EXPECT_EQ(calls[0]["function"]["name"], "convert");
  const json args = json::parse(calls[0]["function"]["arguments"].get<std::string>(), nullptr, false);
  EXPECT_TRUE((args == json{{"unit", "c"}}) || (args == json{{"unit", "f"}})) << j.dump();
}

TEST(StructuredServer, NamedToolChoiceCallsThatTool) {
  TestServer s(read_template("Qwen-Qwen2.5-7B-Instruct.jinja"));
  const json j = s.ok("/v1/chat/completions",
                      {{"messages", {user("hi")}},
                       {"tools", {weather_tool(), time_tool()}},
                       {"tool_choice", {{"type", "function"}, {"function", {{"name", "get_time"}}}}},
                       {"temperature", 0},
                       {"max_tokens", 100}});
  const json& calls = j["choices"][0]["message"]["tool_calls"];
  ASSERT_EQ(calls.size(), 1u) << j.dump();
  EXPECT_EQ(calls[0]["function"]["name"], "get_time");
  expect_valid_arguments("get_time", calls[0]["function"]["arguments"].get<std::string>());
}

TEST(StructuredServer, AutoWithoutACallIsContent) {
  // tool_choice auto waits for the template's marker (a lazy grammar); until it appears the text
  // is the model's own: the same as with tool_choice none, which renders the same prompt.
  TestServer s(read_template("Qwen-Qwen2.5-7B-Instruct.jinja"));
  json body = {{"messages", {user("Say something.")}},
               {"tools", {weather_tool()}},
               {"temperature", 0},
               {"max_tokens", 24}};
  body["tool_choice"] = "none";
  const json none = s.ok("/v1/chat/completions", body);
  const std::string text = none["choices"][0]["message"]["content"];
  ASSERT_EQ(text.find("<tool_call>"), std::string::npos)
      << "the model called a tool unasked: pick another prompt";
  EXPECT_FALSE(none["choices"][0]["message"].contains("tool_calls"));
  body["tool_choice"] = "auto";
  const json autoj = s.ok("/v1/chat/completions", body);
  EXPECT_EQ(autoj["choices"][0]["message"]["content"], text);
  EXPECT_FALSE(autoj["choices"][0]["message"].contains("tool_calls"));
  EXPECT_EQ(autoj["choices"][0]["finish_reason"], none["choices"][0]["finish_reason"]);
}

TEST(StructuredServer, ToolResultsInTheConversation) {
  TestServer s(read_template("Qwen-Qwen2.5-7B-Instruct.jinja"));
  const json call = {{"id", "call_1"},
                     {"type", "function"},
                     {"function", {{"name", "get_weather"}, {"arguments", R"({"city":"Oslo","days":2})"}}}};
  const json messages = {user("Weather in Oslo?"),
                         {{"role", "assistant"}, {"content", nullptr}, {"tool_calls", {call}}},
                         {{"role", "tool"}, {"tool_call_id", "call_1"}, {"content", "rain, 4 C"}}};
  const json prompt = s.ok("/apply-template", {{"messages", messages}, {"tools", {weather_tool()}}});
  const std::string p = prompt["prompt"];
  EXPECT_NE(p.find("\"city\": \"Oslo\""), std::string::npos) << p;  // the arguments, as an object
  EXPECT_NE(p.find("rain, 4 C"), std::string::npos) << p;
  EXPECT_NE(p.find("get_weather"), std::string::npos) << p;
  const json j = s.ok("/v1/chat/completions", {{"messages", messages},
                                               {"tools", {weather_tool()}},
                                               {"tool_choice", "none"},
                                               {"max_tokens", 8},
                                               {"temperature", 0}});
  EXPECT_TRUE(j["choices"][0]["message"]["content"].is_string());
}

TEST(StructuredServer, GrammarsAndSchemasShapeTheOutput) {
  TestServer s;
  const std::string yes_no = "root ::= (\"yes\" | \"no\") \" \" [0-9]{2}";
  const json native = s.ok(
      "/completion", {{"prompt", "Answer:"}, {"grammar", yes_no}, {"n_predict", 32}, {"temperature", 0}});
  EXPECT_TRUE(in_grammar(yes_no, native["content"].get<std::string>())) << native["content"];
  EXPECT_EQ(native["stop_type"], "eos");

  const json schema =
      json::parse(R"({"type": "object", "properties": {"n": {"type": "integer", "minimum": 3, "maximum": 9},
      "tag": {"enum": ["a", "b"]}}, "required": ["n", "tag"], "additionalProperties": false})");
  auto check_schema_output = [&](const std::string& text) {
    const json v = json::parse(text, nullptr, false);
    ASSERT_TRUE(v.is_object()) << text;
    EXPECT_EQ(v.size(), 2u) << text;
    EXPECT_TRUE(v["n"].is_number_integer() && v["n"] >= 3 && v["n"] <= 9) << text;
    EXPECT_TRUE(v["tag"] == "a" || v["tag"] == "b") << text;
  };
  for (double temperature : {0.0, 1.0}) {
    const json base = {{"temperature", temperature}, {"seed", 3}, {"max_tokens", 120}};
    json a = base;
    a["prompt"] = "JSON:";
    a["json_schema"] = schema;
    check_schema_output(s.ok("/completion", a)["content"].get<std::string>());
    json b = base;
    b["prompt"] = "JSON:";
    b["response_format"] = {{"type", "json_schema"}, {"json_schema", {{"name", "x"}, {"schema", schema}}}};
    check_schema_output(s.ok("/v1/completions", b)["choices"][0]["text"].get<std::string>());
    json c = base;
    c["messages"] = {user("Give me JSON.")};
    c["response_format"] = b["response_format"];
    check_schema_output(
        s.ok("/v1/chat/completions", c)["choices"][0]["message"]["content"].get<std::string>());
    // json_object: any object; a random-weight model may still be inside it at max_tokens.
    c["response_format"] = {{"type", "json_object"}};
    const json choice = s.ok("/v1/chat/completions", c)["choices"][0];
    const std::string content = choice["message"]["content"].get<std::string>();
    if (choice["finish_reason"] == "stop") {
      EXPECT_TRUE(json::parse(content, nullptr, false).is_object()) << content;
    } else {
      EXPECT_EQ(choice["finish_reason"], "length");
      const size_t first = content.find_first_not_of(" \n\t");
      ASSERT_NE(first, std::string::npos) << content;
      EXPECT_EQ(content[first], '{') << content;
    }
  }
  // Properties come in the schema's order, not sorted (the request is sent with its keys in order).
  const auto ordered = nlohmann::ordered_json::parse(R"({"type": "object", "properties": {"z": {"const": 1},
      "a": {"const": 2}}, "required": ["z", "a"], "additionalProperties": false})");
  const std::string text = s.ok("/completion", nlohmann::ordered_json{{"prompt", "JSON:"},
                                                                      {"json_schema", ordered},
                                                                      {"n_predict", 60},
                                                                      {"temperature", 0}})["content"];
  EXPECT_LT(text.find("\"z\""), text.find("\"a\"")) << text;
}

TEST(StructuredServer, UnsupportedRequestsAre400s) {
  TestServer s(read_template("Qwen-Qwen2.5-7B-Instruct.jinja"));
  const json msgs = {user("x")};
  auto has = [](const std::string& message, const std::string& needle) {
    EXPECT_NE(message.find(needle), std::string::npos) << message;
  };
  has(s.refusal("/completion", {{"prompt", "x"}, {"grammar", "root ::= ("}}), "grammar");
  has(s.refusal("/completion", {{"prompt", "x"}, {"grammar", 5}}), "'grammar'");
  has(s.refusal("/completion",
                {{"prompt", "x"}, {"json_schema", {{"type", "string"}, {"contentEncoding", "base64"}}}}),
      "contentEncoding");
  has(s.refusal("/completion",
                {{"prompt", "x"}, {"grammar", "root ::= \"a\""}, {"json_schema", {{"type", "string"}}}}),
      "only one");
  has(s.refusal("/v1/chat/completions", {{"messages", msgs}, {"response_format", {{"type", "xml"}}}}),
      "response_format");
  has(s.refusal("/v1/chat/completions", {{"messages", msgs}, {"response_format", {{"type", "json_schema"}}}}),
      "response_format");
  has(s.refusal("/v1/chat/completions", {{"messages", msgs}, {"tools", {{{"type", "retrieval"}}}}}),
      "tools[0].type");
  has(s.refusal("/v1/chat/completions", {{"messages", msgs}, {"tool_choice", "required"}}), "tool_choice");
  has(s.refusal("/v1/chat/completions",
                {{"messages", msgs},
                 {"tools", {weather_tool()}},
                 {"tool_choice", {{"type", "function"}, {"function", {{"name", "nope"}}}}}}),
      "nope");
  has(s.refusal("/v1/chat/completions",
                {{"messages", msgs}, {"tools", {weather_tool()}}, {"grammar", "root ::= \"a\""}}),
      "grammar");
  has(s.refusal("/v1/completions", {{"prompt", "x"}, {"tools", {weather_tool()}}}), "'tools'");
  has(s.refusal("/v1/chat/completions",
                {
    {
      "messages", {
        user("x"), {
          {"role", "assistant"}, {
            "tool_calls", {
              {
                {"id", "1"}, {"type", "function"}, {
                  "function", {
                    {"name", "f"}, { "arguments", "{oops" }
                  }
                }
              }
            }
          }
        }
      }
    }}),
      "arguments");
}

}  // namespace
}  // namespace kiln::serve
