// Requests against the embedded default model (in-process, loopback), whose greedy continuation
// of "And God said" ends with its end-of-text token after a few tokens:
// - ignore_eos on every completion route: the end-of-generation tokens are never sampled, so the
//   generation runs to its limit, its tokens are the stopped run's up to where that one ended,
//   and none of them is an EOG token;
// - tool_choice "required" with a parameter schema that has an enum-only property (no "type"):
//   the call's arguments validate against the schema (its string is bounded: the model, which
//   knows nothing of tools, would write an unbounded one until the context is full).
#include <gtest/gtest.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <string>

#include "in_process_server.h"
#include "serve/server.h"

namespace kiln::serve {
namespace {

using nlohmann::json;

constexpr int kLimit = 40;
const char* const kPrompt = "And God said";  // greedy: " unto him, I am I am." then end of text

std::shared_ptr<const Model> model() {
  static auto m = Model::load(KILN_SOURCE_DIR "/models/kjv-llama-q8_0.gguf");
  EXPECT_TRUE(m.ok()) << (m.ok() ? "" : m.error().message);
  return m.ok() ? *m : nullptr;
}

class DefaultModelTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    ServerOptions o;
    o.n_parallel = 2;
    o.n_threads = 2;
    o.context.n_ctx =
        2048;  // 1024 per slot: the tools' system text (~400 tokens) is longer than the model's 128
    server_ = test::start_server(o, model(), &port_).release();
    ASSERT_NE(server_, nullptr);
  }
  static void TearDownTestSuite() { delete server_; }
  // The 200 response's body; fails the test otherwise.
  static json ok(const std::string& path, const json& body) {
    auto r = test::post_json(port_, path, body);
    EXPECT_TRUE(r);
    if (!r) return json::object();
    EXPECT_EQ(r->status, 200) << path << ": " << r->body;
    return json::parse(r->body);
  }
  static Server* server_;
  static int port_;
};
Server* DefaultModelTest::server_ = nullptr;
int DefaultModelTest::port_ = 0;

TEST_F(DefaultModelTest, NativeRouteRunsToTheLimitWithoutEogTokens) {
  const json body = {{"prompt", kPrompt}, {"n_predict", kLimit}, {"temperature", 0}, {"return_tokens", true}};
  const json stopped = ok("/completion", body);
  ASSERT_EQ(stopped["stop_type"], "eos") << "the model no longer ends this prompt early: pick another";
  const auto& short_tokens = stopped["tokens"];
  ASSERT_LT(short_tokens.size(), static_cast<size_t>(kLimit));

  json ignoring = body;
  ignoring["ignore_eos"] = true;
  const json full = ok("/completion", ignoring);
  EXPECT_EQ(full["stop_type"], "limit");
  EXPECT_EQ(full["tokens_predicted"], kLimit);
  const auto& tokens = full["tokens"];
  ASSERT_EQ(tokens.size(), static_cast<size_t>(kLimit));
  for (size_t i = 0; i < short_tokens.size(); ++i) EXPECT_EQ(tokens[i], short_tokens[i]) << "token " << i;
  const text::Vocab& vocab = model()->tokenizer().vocab();
  ASSERT_FALSE(vocab.eog_ids().empty());
  for (const auto& t : tokens) EXPECT_FALSE(vocab.is_eog(t.get<int32_t>())) << "token " << t;
  EXPECT_EQ(full["content"].get<std::string>().rfind(stopped["content"].get<std::string>(), 0), 0u);

  // false is the default.
  ignoring["ignore_eos"] = false;
  EXPECT_EQ(ok("/completion", ignoring)["tokens"], short_tokens);
}

TEST_F(DefaultModelTest, OpenAiRoutesRunToMaxTokens) {
  const json completion = {{"prompt", kPrompt}, {"max_tokens", kLimit}, {"temperature", 0}};
  const json stopped = ok("/v1/completions", completion);
  ASSERT_EQ(stopped["choices"][0]["finish_reason"], "stop");
  ASSERT_LT(stopped["usage"]["completion_tokens"], kLimit);
  json ignoring = completion;
  ignoring["ignore_eos"] = true;
  const json full = ok("/v1/completions", ignoring);
  EXPECT_EQ(full["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(full["usage"]["completion_tokens"], kLimit);
  const std::string text = full["choices"][0]["text"];
  EXPECT_EQ(text.rfind(stopped["choices"][0]["text"].get<std::string>(), 0), 0u) << text;

  // The chat route, with several choices: each runs to max_tokens.
  const json chat = {{"messages", {{{"role", "user"}, {"content", kPrompt}}}},
                     {"max_tokens", kLimit},
                     {"n", 2},
                     {"seed", 3},
                     {"ignore_eos", true}};
  const json reply = ok("/v1/chat/completions", chat);
  ASSERT_EQ(reply["choices"].size(), 2u) << reply.dump();
  for (const auto& choice : reply["choices"]) EXPECT_EQ(choice["finish_reason"], "length") << reply.dump();
  EXPECT_EQ(reply["usage"]["completion_tokens"], 2 * kLimit) << reply.dump();
}

// A grammar that is complete admits only the end of generation: the generation ends there,
// ignore_eos or not, with the text the grammar wants.
TEST_F(DefaultModelTest, ACompleteGrammarStillEnds) {
  constexpr int kGrammarLimit = 300;  // above the longest text the grammar admits (bounded spaces)
  const json schema =
      json::parse(R"({"type": "object", "properties": {"a": {"enum": ["x", "y"]}}, "required": ["a"]})");
  const json reply = ok("/completion", {{"prompt", kPrompt},
                                        {"n_predict", kGrammarLimit},
                                        {"temperature", 0},
                                        {"json_schema", schema},
                                        {"ignore_eos", true}});
  EXPECT_EQ(reply["stop_type"], "eos") << reply.dump();
  EXPECT_LT(reply["tokens_predicted"], kGrammarLimit);
  const json value = json::parse(reply["content"].get<std::string>(), nullptr, false);
  ASSERT_TRUE(value.is_object()) << reply.dump();
  EXPECT_TRUE(value["a"] == "x" || value["a"] == "y") << reply.dump();
}

TEST_F(DefaultModelTest, ABadValueIsRefused) {
  auto r = test::post_json(port_, "/v1/completions", {{"prompt", kPrompt}, {"ignore_eos", "yes"}});
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 400);
  EXPECT_NE(r->body.find("ignore_eos"), std::string::npos) << r->body;
}

TEST_F(DefaultModelTest, RequiredToolCallValidatesAgainstTheSchema) {
  const json tool = json::parse(R"({"type": "function", "function": {"name": "get_weather",
      "parameters": {"type": "object", "properties": {"city": {"type": "string", "maxLength": 12}, "unit": {"enum": ["c", "f"]}},
                     "required": ["city"]}}})");
  for (const double temperature : {0.0, 1.0}) {
    SCOPED_TRACE(temperature);
    const json reply =
        ok("/v1/chat/completions", {{"messages", {{{"role", "user"}, {"content", "Weather in Paris?"}}}},
                                    {"tools", {tool}},
                                    {"tool_choice", "required"},
                                    {"temperature", temperature},
                                    {"seed", 5},
                                    {"max_tokens", 120}});
    const json& choice = reply["choices"][0];
    EXPECT_EQ(choice["finish_reason"], "tool_calls") << reply.dump();
    const json& calls = choice["message"]["tool_calls"];
    ASSERT_TRUE(calls.is_array() && calls.size() == 1) << reply.dump();
    EXPECT_EQ(calls[0]["function"]["name"], "get_weather");
    const json args = json::parse(calls[0]["function"]["arguments"].get<std::string>(), nullptr, false);
    ASSERT_TRUE(args.is_object()) << reply.dump();
    ASSERT_TRUE(args.contains("city") && args["city"].is_string()) << args.dump();
    const std::string city = args["city"];
    const auto code_points =
        std::count_if(city.begin(), city.end(), [](char c) { return (c & 0xC0) != 0x80; });
    EXPECT_LE(code_points, 12) << args.dump();
    for (const auto& [key, value] : args.items()) {
      EXPECT_TRUE(key == "city" || key == "unit") << args.dump();
      if (key == "unit") {
        EXPECT_TRUE(value == "c" || value == "f") << args.dump();
      }
    }
  }
}

}  // namespace
}  // namespace kiln::serve
