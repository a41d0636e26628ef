// Reasoning and server-wide output defaults through the HTTP server (in-process, loopback, the
// qwen2 fixture with a ChatML template whose generation prompt opens "<think>"):
// --reasoning-format and the request's reasoning_format (none keeps the block in the content,
// deepseek moves it to reasoning_content, in answers and stream deltas), -rea off and
// chat_template_kwargs.enable_thinking, --reasoning-budget and reasoning_budget_tokens (the end
// tag forced after N tokens, 0 at once), and --grammar / --json-schema as defaults that a
// request's own format or tools replace. The expected texts of the budget cases are
// llama-server's answers to the same requests (same model, template and greedy settings).
#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include <nlohmann/json.hpp>
#include <string>
#include <tuple>

#include "in_process_server.h"

namespace kiln::serve {
namespace {

using nlohmann::json;

// ChatML whose assistant turns write reasoning between <think> tags; the generation prompt opens
// the block ("<think>", closed at once when enable_thinking is false).
constexpr const char* kThinkTemplate =
    "{%- for m in messages %}<|im_start|>{{ m.role }}\n"
    "{% if m.role == 'assistant' and m.reasoning_content %}<think>\n{{ m.reasoning_content }}\n</think>\n\n{% endif %}"
    "{{ m.content }}<|im_end|>\n{% endfor %}"
    "{%- if add_generation_prompt %}<|im_start|>assistant\n"
    "{% if enable_thinking is defined and not enable_thinking %}<think>\n\n</think>\n\n{% else %}<think>{% endif %}"
    "{%- endif %}";

class Reasoning {
 public:
  explicit Reasoning(ServerOptions o = {}) {
    o.n_parallel = 1;
    o.n_threads = 2;
    o.context.n_ctx = 1024;
    o.chat_template_source = kThinkTemplate;
    server_ = test::start_server(o, test::qwen2_model(), &port_);
  }
  ~Reasoning() {
    if (server_) server_->stop();
  }
  // The response of `body` (status checked), greedy and uncached unless the body says otherwise.
  json post(const std::string& path, json body, int status = 200) const {
    if (!body.contains("temperature")) body["temperature"] = 0;
    body["cache_prompt"] = false;
    auto r = test::post_json(port_, path, body);
    EXPECT_TRUE(r);
    if (!r) return json();
    EXPECT_EQ(r->status, status) << body.dump() << " -> " << r->body;
    return json::parse(r->body, nullptr, false);
  }
  int port() const { return port_; }
  json message(json body) const {
    body["messages"] = json::array({{{"role", "user"}, {"content", "hi"}}});
    if (!body.contains("max_tokens")) body["max_tokens"] = 10;
    return post("/v1/chat/completions", body)["choices"][0]["message"];
  }
  // The streamed deltas' reasoning_content and content, each concatenated.
  std::pair<std::string, std::string> streamed(json body) const {
    body["messages"] = json::array({{{"role", "user"}, {"content", "hi"}}});
    body["max_tokens"] = 10;
    body["stream"] = true;
    body["temperature"] = 0;
    body["cache_prompt"] = false;
    auto r = test::post_json(port_, "/v1/chat/completions", body);
    EXPECT_TRUE(r && r->status == 200);
    std::string reasoning, content;
    if (!r) return {};
    for (size_t at = 0; (at = r->body.find("data: ", at)) != std::string::npos;) {
      const size_t end = r->body.find("\n\n", at);
      const std::string data = r->body.substr(at + 6, end - at - 6);
      at = end;
      if (data == "[DONE]") break;
      const json d = json::parse(data)["choices"][0]["delta"];
      if (d.contains("reasoning_content")) reasoning += d["reasoning_content"].get<std::string>();
      if (d.contains("content") && d["content"].is_string()) content += d["content"].get<std::string>();
    }
    return {reasoning, content};
  }

 private:
  std::unique_ptr<Server> server_;
  int port_ = 0;
};

std::string str(const json& j, const char* key) { return j.contains(key) && j[key].is_string() ? j[key].get<std::string>() : ""; }

TEST(ReasoningServer, FormatsPutTheBlockInContentOrReasoningContent) {
  const Reasoning s;
  const json none = s.message({{"reasoning_format", "none"}});
  const json deepseek = s.message({{"reasoning_format", "deepseek"}});
  const json legacy = s.message({{"reasoning_format", "deepseek-legacy"}});
  const json plain = s.message({});  // the server's default: auto
  // The model never closes the block: all of its text is reasoning.
  ASSERT_FALSE(str(deepseek, "reasoning_content").empty());
  EXPECT_EQ(str(deepseek, "content"), "");
  EXPECT_FALSE(none.contains("reasoning_content"));
  // none: the block as written, the opening tag (from the generation prompt) included.
  EXPECT_EQ(str(none, "content"), "<think>" + str(deepseek, "reasoning_content"));
  EXPECT_EQ(legacy, deepseek);
  EXPECT_EQ(plain, deepseek);
  // Streamed deltas add up to the same split.
  const auto [reasoning, content] = s.streamed({{"reasoning_format", "deepseek"}});
  EXPECT_EQ(reasoning, str(deepseek, "reasoning_content"));
  EXPECT_EQ(content, "");
  const auto [r_none, c_none] = s.streamed({{"reasoning_format", "none"}});
  EXPECT_EQ(r_none, "");
  EXPECT_EQ(c_none, str(none, "content"));
  // An unknown name is the client's mistake; the completion routes still refuse the field.
  EXPECT_NE(s.post("/v1/chat/completions",
                   {{"messages", {{{"role", "user"}, {"content", "hi"}}}}, {"reasoning_format", "verbose"}}, 400)
                .dump()
                .find("reasoning_format"),
            std::string::npos);
  s.post("/v1/completions", {{"prompt", "hi"}, {"reasoning_format", "deepseek"}}, 400);
}

TEST(ReasoningServer, TheServerFormatIsTheDefault) {
  ServerOptions o;
  o.reasoning_format = "none";
  const Reasoning s(o);
  const json m = s.message({});
  EXPECT_EQ(str(m, "content").rfind("<think>", 0), 0u) << m.dump();
  EXPECT_FALSE(m.contains("reasoning_content"));
  EXPECT_TRUE(s.message({{"reasoning_format", "deepseek"}}).contains("reasoning_content"));
}

TEST(ReasoningServer, BudgetForcesTheEndTagAsLlamaServerDoes) {
  const Reasoning s;
  const json free = s.message({{"reasoning_format", "none"}, {"max_tokens", 8}});
  const json zero = s.message({{"reasoning_format", "none"}, {"max_tokens", 8}, {"reasoning_budget_tokens", 0}});
  const json three = s.message({{"reasoning_format", "none"}, {"max_tokens", 8}, {"reasoning_budget_tokens", 3}});
  const json split = s.message({{"max_tokens", 8}, {"reasoning_budget_tokens", 3}});
  // llama-server's answers (llama-server --jinja --chat-template-file with this template).
  EXPECT_EQ(str(free, "content"), "<think>옵scriptId Canal片/plugin systemFontOfSize_pres.Open");
  // 0: the end tag right after the opening one; 3: after three tokens of thought.
  EXPECT_EQ(str(zero, "content"), "<think></think>옵落在 Fore Drawer Jenkins");
  EXPECT_EQ(str(three, "content"), "<think>옵scriptId Canal</think>[PAD151904]最も");
  EXPECT_EQ(str(split, "reasoning_content"), "옵scriptId Canal");
  EXPECT_EQ(str(split, "content"), "[PAD151904]最も");
  // -1 is the server's budget (none here); a budget below -1 is refused.
  EXPECT_EQ(s.message({{"reasoning_format", "none"}, {"max_tokens", 8}, {"reasoning_budget_tokens", -1}}), free);
  s.post("/v1/chat/completions",
         {{"messages", {{{"role", "user"}, {"content", "hi"}}}}, {"reasoning_budget_tokens", -2}}, 400);
  // The server's --reasoning-budget and --reasoning-budget-message.
  ServerOptions o;
  o.reasoning_budget = 0;
  o.reasoning_budget_message = " Enough.";
  const Reasoning capped(o);
  const json m = capped.message({{"reasoning_format", "none"}, {"max_tokens", 8}});
  EXPECT_EQ(str(m, "content"), "<think> Enough.</think> racially insensitiveドラマ");
}

// reasoning_control: POST /v1/chat/completions/control {"id", "action": "reasoning_end"} while the
// answer streams forces the end tag before the next token. Where it lands depends on timing, so
// the test counts the tokens written before the end tag (the stream's logprobs list them) and
// checks the whole answer against reasoning_budget_tokens of that count: the same forcing.
TEST(ReasoningServer, ControlEndsTheBlockBeingWritten) {
  const Reasoning s;
  const auto& tok = test::qwen2_model()->tokenizer();
  json ban = json::array();
  for (int32_t id : {tok.eos(), tok.eot()})
    if (id >= 0) ban.push_back({id, false});
  const json messages = json::array({{{"role", "user"}, {"content", "hi"}}});
  const json base = {{"messages", messages}, {"max_tokens", 200}, {"temperature", 0}, {"cache_prompt", false},
                     {"reasoning_format", "none"}, {"logit_bias", ban}};

  json body = base;
  body["stream"] = true;
  body["logprobs"] = true;
  body["reasoning_control"] = true;
  httplib::Client c("127.0.0.1", s.port());
  c.set_read_timeout(60, 0);
  httplib::Request req;
  req.method = "POST";
  req.path = "/v1/chat/completions";
  req.body = body.dump();
  req.set_header("Content-Type", "application/json");
  std::string sse, control_answer;
  req.content_receiver = [&](const char* data, size_t n, uint64_t, uint64_t) {
    sse.append(data, n);
    const size_t at = sse.find("data: {");
    if (control_answer.empty() && at != std::string::npos && sse.find("\n\n", at) != std::string::npos) {
      const std::string first = sse.substr(at + 6, sse.find("\n\n", at) - at - 6);
      const json id = json::parse(first)["id"];
      auto r = test::post_json(s.port(), "/v1/chat/completions/control", {{"id", id}, {"action", "reasoning_end"}});
      control_answer = r ? r->body : "no answer";
    }
    return true;
  };
  ASSERT_TRUE(c.send(req));
  EXPECT_EQ(json::parse(control_answer, nullptr, false), json({{"success", true}})) << control_answer;

  std::string content, token_text;
  std::vector<size_t> token_ends;  // each token's end offset in token_text
  for (size_t at = 0; (at = sse.find("data: ", at)) != std::string::npos;) {
    const size_t end = sse.find("\n\n", at);
    const std::string data = sse.substr(at + 6, end - at - 6);
    at = end;
    if (data == "[DONE]") break;
    const json ch = json::parse(data)["choices"][0];
    if (ch["delta"].contains("content") && ch["delta"]["content"].is_string())
      content += ch["delta"]["content"].get<std::string>();
    if (!ch["logprobs"].is_null())
      for (const json& t : ch["logprobs"]["content"]) {
        token_text += t["token"].get<std::string>();
        token_ends.push_back(token_text.size());
      }
  }
  const size_t tag = token_text.find("</think>");  // the end tag's tokens (several here)
  ASSERT_NE(tag, std::string::npos) << content;
  const auto thought = static_cast<int32_t>(std::count_if(token_ends.begin(), token_ends.end(), [&](size_t e) { return e <= tag; }));
  ASSERT_LT(thought, 190) << "the control came too late to test anything";
  json budget = base;
  budget["reasoning_budget_tokens"] = thought;
  EXPECT_EQ(content, str(s.post("/v1/chat/completions", budget)["choices"][0]["message"], "content"));
  EXPECT_EQ(content.rfind("<think>", 0), 0u) << content;

  // The refusals, in llama-server's words.
  auto control = [&](json b) {
    auto r = test::post_json(s.port(), "/v1/chat/completions/control", b);
    return r ? json::parse(r->body, nullptr, false) : json();
  };
  EXPECT_EQ(control({{"id", "chatcmpl-none"}, {"action", "reasoning_end"}}),
            json({{"success", false}, {"message", "no active completion for this id"}}));
  EXPECT_EQ(s.post("/v1/chat/completions/control", {{"action", "reasoning_end"}}, 400)["error"]["message"],
            "field 'id' must be a string");
  EXPECT_EQ(s.post("/v1/chat/completions/control", {{"id", 3}, {"action", "reasoning_end"}}, 400)["error"]["message"],
            "field 'id' must be a string");
  s.post("/v1/chat/completions", {{"messages", messages}, {"reasoning_control", "yes"}}, 400);
  // Not armed, or an unknown action: refused while the completion is live (the control is sent
  // from inside the stream's first chunk).
  for (const auto& [armed, action, message] :
       {std::tuple{false, "reasoning_end", "reasoning control not enabled for this completion"},
        std::tuple{true, "stop", "unknown control action"}}) {
    json b = base;
    b["stream"] = true;
    b["reasoning_control"] = armed;
    httplib::Request q = req;
    q.body = b.dump();
    std::string got, answer;
    q.content_receiver = [&](const char* data, size_t n, uint64_t, uint64_t) {
      got.append(data, n);
      const size_t at = got.find("data: {");
      if (answer.empty() && at != std::string::npos && got.find("\n\n", at) != std::string::npos) {
        const json id = json::parse(got.substr(at + 6, got.find("\n\n", at) - at - 6))["id"];
        answer = control({{"id", id}, {"action", action}}).dump();
      }
      return answer.empty();  // then hang up: the generation is cancelled
    };
    c.send(q);
    EXPECT_EQ(json::parse(answer), json({{"success", false}, {"message", message}})) << armed << " " << action;
  }
}

// Completion ids are 128 random bits, and a control request must present the completion's API key
// (its Authorization header): another client can neither guess an id nor steer a completion whose
// id it learnt (issue 30: ids were a timestamp and a counter).
TEST(ReasoningServer, OnlyTheOwnerControlsACompletion) {
  const Reasoning s;
  json body = {{"messages", json::array({{{"role", "user"}, {"content", "hi"}}})},
               {"max_tokens", 200}, {"temperature", 0}, {"cache_prompt", false},
               {"reasoning_control", true}, {"stream", true}};
  httplib::Client c("127.0.0.1", s.port());
  c.set_read_timeout(60, 0);
  httplib::Request req;
  req.method = "POST";
  req.path = "/v1/chat/completions";
  req.body = body.dump();
  req.set_header("Content-Type", "application/json");
  req.set_header("Authorization", "Bearer owner");
  auto control = [&](const std::string& id, const std::string& authorization) {
    httplib::Headers h;
    if (!authorization.empty()) h.emplace("Authorization", authorization);
    auto r = httplib::Client("127.0.0.1", s.port())
                 .Post("/v1/chat/completions/control", h, json{{"id", id}, {"action", "reasoning_end"}}.dump(),
                       "application/json");
    return r ? json::parse(r->body, nullptr, false) : json();
  };
  const json unknown = {{"success", false}, {"message", "no active completion for this id"}};
  std::string got, id;
  std::vector<json> answers;
  req.content_receiver = [&](const char* data, size_t n, uint64_t, uint64_t) {
    got.append(data, n);
    const size_t at = got.find("data: {");
    if (id.empty() && at != std::string::npos && got.find("\n\n", at) != std::string::npos) {
      id = json::parse(got.substr(at + 6, got.find("\n\n", at) - at - 6))["id"];
      std::string neighbour = id;
      neighbour.back() = neighbour.back() == '0' ? '1' : '0';
      answers = {control(id, "Bearer someone-else"), control(id, ""), control(neighbour, "Bearer owner"),
                 control(id, "Bearer owner")};
    }
    return id.empty();  // then hang up: the generation is cancelled
  };
  c.send(req);
  ASSERT_EQ(id.size(), std::string("chatcmpl-").size() + 32) << id;
  EXPECT_EQ(id.rfind("chatcmpl-", 0), 0u) << id;
  EXPECT_EQ(id.find_first_not_of("0123456789abcdef", 9), std::string::npos) << id;
  ASSERT_EQ(answers.size(), 4u);
  EXPECT_EQ(answers[0], unknown) << "another key";
  EXPECT_EQ(answers[1], unknown) << "no key";
  EXPECT_EQ(answers[2], unknown) << "a neighbouring id";
  EXPECT_EQ(answers[3], json({{"success", true}})) << "the owner";
}

TEST(ReasoningServer, ThinkingOffClosesTheBlockInThePrompt) {
  ServerOptions off;
  off.enable_thinking = false;
  const Reasoning s(off);
  const json hi = {{"messages", {{{"role", "user"}, {"content", "hi"}}}}};
  const std::string closed = "<|im_start|>assistant\n<think>\n\n</think>\n\n";
  auto prompt = [&](const Reasoning& r, json body) { return str(r.post("/apply-template", body), "prompt"); };
  EXPECT_NE(prompt(s, hi).find(closed), std::string::npos);
  json on = hi;
  on["chat_template_kwargs"] = {{"enable_thinking", true}};  // the request's kwargs win over -rea
  EXPECT_EQ(prompt(s, on).find(closed), std::string::npos);
  const Reasoning defaults;
  json effort = hi;
  effort["reasoning_effort"] = "none";
  EXPECT_NE(prompt(defaults, effort).find(closed), std::string::npos);
  json bad = hi;
  bad["chat_template_kwargs"] = {{"enable_thinking", "false"}};
  defaults.post("/apply-template", bad, 400);
  // The answer of a closed block is all content (llama-server's answer).
  const json m = s.message({{"max_tokens", 8}});
  EXPECT_FALSE(m.contains("reasoning_content")) << m.dump();
  EXPECT_EQ(str(m, "content"), "火星刑事责任 الفكر*/\n\n\n(Vertexanismmt hóa");
}

TEST(ReasoningServer, ServerGrammarIsTheDefaultARequestsOwnFormatWins) {
  ServerOptions o;
  o.grammar = R"(root ::= "yes" | "no")";
  const Reasoning s(o);
  // Thinking off: the answer is content (an open block would make it reasoning).
  const json hi = {{"messages", {{{"role", "user"}, {"content", "hi"}}}},
                   {"max_tokens", 5},
                   {"chat_template_kwargs", {{"enable_thinking", false}}}};
  auto text = [&](const std::string& path, json body) {
    const json r = s.post(path, body);
    if (path == "/completion") return str(r, "content");
    const json& c = r["choices"][0];
    return c.contains("text") ? str(c, "text") : str(c["message"], "content");
  };
  for (const std::string& answer : {text("/completion", {{"prompt", "hi"}, {"n_predict", 5}}),
                                    text("/v1/completions", {{"prompt", "hi"}, {"max_tokens", 5}}),
                                    text("/v1/chat/completions", hi)})
    EXPECT_EQ(answer, "yes");  // llama-server --grammar answers "yes" to these requests too
  json own = hi;
  own["grammar"] = R"(root ::= "maybe")";
  EXPECT_EQ(text("/v1/chat/completions", own), "maybe");
  json schema = hi;
  schema["max_tokens"] = 30;
  schema["response_format"] = {{"type", "json_schema"}, {"json_schema", {{"schema", {{"type", "integer"}}}}}};
  const json numbered = s.post("/v1/chat/completions", schema);
  const std::string number = str(numbered["choices"][0]["message"], "content");
  EXPECT_TRUE(json::parse(number, nullptr, false).is_number_integer()) << numbered.dump();
  // Tools replace the default with their own grammar.
  json tools = hi;
  tools["max_tokens"] = 100;
  tools["tool_choice"] = "required";
  tools["tools"] = json::array({json::parse(R"({"type": "function", "function": {"name": "ping",
      "parameters": {"type": "object", "properties": {}, "additionalProperties": false}}})")});
  const json called = s.post("/v1/chat/completions", tools)["choices"][0]["message"];
  ASSERT_TRUE(called.contains("tool_calls")) << called.dump();
  EXPECT_EQ(called["tool_calls"][0]["function"]["name"], "ping");
}

TEST(ReasoningServer, ServerJsonSchemaIsTheDefault) {
  ServerOptions o;
  o.json_schema = R"({"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"],
                      "additionalProperties": false})";
  const Reasoning s(o);
  const json r = s.post("/v1/completions", {{"prompt", "hi"}, {"max_tokens", 20}});
  const json answer = json::parse(str(r["choices"][0], "text"), nullptr, false);
  ASSERT_TRUE(answer.is_object()) << r.dump();
  EXPECT_TRUE(answer["ok"].is_boolean());
}

}  // namespace
}  // namespace kiln::serve
