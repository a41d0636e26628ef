// The fields of generation requests that change what the model is asked or how it answers, in-
// process against the qwen2 fixture (ChatML-style template): fields kiln lacks are refused by
// every route from one list; the chat prompt's options (add_generation_prompt, a final
// assistant message continued, chat_template_kwargs, null content) as llama-server renders them;
// what a shutdown answers to requests in flight.
#include <gtest/gtest.h>

#include <chrono>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>

#include "http_client.h"
#include "in_process_server.h"
#include "serve/server.h"
#include "serve_process.h"

namespace kiln::serve {
namespace {

using nlohmann::json;
using namespace std::chrono_literals;

std::shared_ptr<const Model> model() { return test::qwen2_model(); }

class RequestFieldsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    ServerOptions o;
    o.n_parallel = 2;
    o.n_threads = 2;
    o.context.n_ctx = 512;
    server_ = test::start_server(o, model(), &port_).release();
    ASSERT_NE(server_, nullptr);
  }
  static void TearDownTestSuite() {
    delete server_;  // stops it
  }
  static httplib::Result post(const std::string& path, const json& body) {
    return test::post_json(port_, path, body);
  }
  // The prompt /apply-template renders for `body`; fails the test unless 200.
  static std::string rendered(const json& body) {
    auto r = post("/apply-template", body);
    EXPECT_TRUE(r);
    if (!r) return {};
    EXPECT_EQ(r->status, 200) << r->body;
    return json::parse(r->body).value("prompt", "");
  }
  static Server* server_;
  static int port_;
};
Server* RequestFieldsTest::server_ = nullptr;
int RequestFieldsTest::port_ = 0;

const json kUser = {{"role", "user"}, {"content", "Name a colour"}};

// Every route refuses the output-changing fields kiln lacks (the OpenAI routes used to answer
// 200 with unconstrained text to mirostat), and accepts their neutral values. Tools are the chat
// route's only; response_format the OpenAI routes' only (grammar and json_schema are everyone's:
// structured_test.cpp).
TEST_F(RequestFieldsTest, UnsupportedFieldsAreRefusedByEveryRoute) {
  const std::vector<std::pair<std::string, json>> refused = {
      {"mirostat", 2},
      {"echo", true},
      {"suffix", "the end"},
      {"best_of", 3},
      {"dry_multiplier", 0.8},
  };
  const std::vector<std::pair<std::string, json>> routes = {
      {"/v1/chat/completions", {{"messages", {kUser}}, {"max_tokens", 2}}},
      {"/v1/completions", {{"prompt", "Once"}, {"max_tokens", 2}}},
      {"/completion", {{"prompt", "Once"}, {"n_predict", 2}}},
  };
  for (const auto& [route, base] : routes) {
    std::vector<std::pair<std::string, json>> refused_here = refused;
    if (route != "/v1/chat/completions") {
      refused_here.push_back({"tools", {{{"type", "function"}, {"function", {{"name", "f"}}}}}});
      refused_here.push_back({"tool_choice", "required"});
      refused_here.push_back({"reasoning_format", "deepseek"});
    }
    if (route == "/completion") refused_here.push_back({"response_format", {{"type", "json_object"}}});
    for (const auto& [field, value] : refused_here) {
      json body = base;
      body[field] = value;
      auto r = post(route, body);
      ASSERT_TRUE(r);
      EXPECT_EQ(r->status, 400) << route << " " << field << ": " << r->body;
      std::string message;
      EXPECT_TRUE(test::is_openai_error(r->body, &message));
      EXPECT_NE(message.find("'" + field + "'"), std::string::npos) << message;
    }
    json neutral = base;
    neutral.update({{"grammar", ""},
                    {"mirostat", 0},
                    {"tools", json::array()},
                    {"tool_choice", "none"},
                    {"response_format", {{"type", "text"}}},
                    {"echo", false},
                    {"suffix", nullptr},
                    {"best_of", 1},
                    {"json_schema", nullptr},
                    {"user", "u"}});
    auto ok = post(route, neutral);
    ASSERT_TRUE(ok);
    EXPECT_EQ(ok->status, 200) << route << ": " << ok->body;
  }
  // n: implemented by the OpenAI routes, not by llama-server's /completion.
  auto native_n = post("/completion", {{"prompt", "Once"}, {"n_predict", 2}, {"n", 2}});
  ASSERT_TRUE(native_n);
  EXPECT_EQ(native_n->status, 400) << native_n->body;
  auto legacy_n = post("/v1/completions", {{"prompt", "Once"}, {"max_tokens", 2}, {"n", 2}});
  ASSERT_TRUE(legacy_n);
  EXPECT_EQ(legacy_n->status, 200) << legacy_n->body;
}

// add_generation_prompt false leaves the assistant's turn unopened (it used to be ignored); a
// final assistant message is continued, its turn left open, unless continue_final_message is
// false; chat_template_kwargs reach the template; null content is empty text.
TEST_F(RequestFieldsTest, ChatPromptOptionsFollowLlamaServer) {
  const std::string opened = rendered({{"messages", {kUser}}});
  const std::string closed = rendered({{"messages", {kUser}}, {"add_generation_prompt", false}});
  const std::string opener = "<|im_start|>assistant\n";
  ASSERT_GT(opened.size(), opener.size());
  EXPECT_EQ(opened.substr(opened.size() - opener.size()), opener);
  EXPECT_EQ(closed + opener, opened);

  const json prefill = {kUser, {{"role", "assistant"}, {"content", "Blue, or"}}};
  EXPECT_EQ(rendered({{"messages", prefill}}), opened + "Blue, or");
  EXPECT_EQ(rendered({{"messages", prefill}, {"add_generation_prompt", false}}), opened + "Blue, or");
  const std::string finished = rendered({{"messages", prefill}, {"continue_final_message", false}});
  EXPECT_EQ(finished.substr(0, opened.size() + 8), opened + "Blue, or");
  EXPECT_NE(finished.find("Blue, or<|im_end|>"), std::string::npos) << finished;
  auto two = post("/apply-template", {{"messages", {kUser, prefill[1], prefill[1]}}});
  ASSERT_TRUE(two);
  EXPECT_EQ(two->status, 400) << two->body;

  // The chat route generates from the same prompt: greedy, as /completion from that text.
  auto chat = post("/v1/chat/completions", {{"messages", prefill}, {"max_tokens", 5}, {"temperature", 0}});
  auto native = post("/completion", {{"prompt", opened + "Blue, or"}, {"n_predict", 5}, {"temperature", 0}});
  ASSERT_TRUE(chat && native);
  ASSERT_EQ(chat->status, 200) << chat->body;
  ASSERT_EQ(native->status, 200) << native->body;
  EXPECT_EQ(json::parse(chat->body)["choices"][0]["message"]["content"],
            json::parse(native->body)["content"]);

  // A template variable through chat_template_kwargs.
  const std::string with_kwargs =
      rendered({{"messages", {{{"role", "system"}, {"content", "Be brief."}}, kUser}},
                {"chat_template_kwargs", {{"enable_thinking", false}}}});
  EXPECT_NE(with_kwargs.find("Be brief."), std::string::npos);
  auto bad_kwargs = post("/apply-template", {{"messages", {kUser}}, {"chat_template_kwargs", 3}});
  ASSERT_TRUE(bad_kwargs);
  EXPECT_EQ(bad_kwargs->status, 400);

  // content: null is empty text (it used to surface an internal template error).
  const std::string null_content = rendered({{"messages", {{{"role", "user"}, {"content", nullptr}}}}});
  EXPECT_EQ(null_content, rendered({{"messages", {{{"role", "user"}, {"content", ""}}}}}));
}

// Stopping the server answers a request in flight with 503 (it used to be 500), at once; the full
// queue's 503 says when to retry.
TEST(RequestShutdown, InFlightRequestsGet503) {
  ServerOptions o;
  o.n_parallel = 1;
  o.queue_limit = 0;
  o.n_threads = 2;
  o.context.n_ctx = 4096;
  Server s(o);
  auto port = s.listen("127.0.0.1", 0);
  ASSERT_TRUE(port.ok());
  ASSERT_TRUE(s.attach(model()).ok());
  const json endless = {{"prompt", "Once"},
                        {"max_tokens", 100000},
                        {"temperature", 0},
                        {"logit_bias", {{"151643", -100}, {"151645", -100}}}};
  test::RawSocket waiting(*port);
  ASSERT_TRUE(waiting.send_all(test::http_post("/v1/completions", endless.dump())));
  auto processing = [&] {
    return test::get_slots(*port).dump().find("\"is_processing\":true") != std::string::npos;
  };
  for (int i = 0; i < 500 && !processing(); ++i) std::this_thread::sleep_for(10ms);
  ASSERT_TRUE(processing());
  {  // the only slot works and nothing may wait: 503 with Retry-After
    httplib::Client c("127.0.0.1", *port);
    auto busy =
        c.Post("/v1/completions", json{{"prompt", "x"}, {"max_tokens", 1}}.dump(), "application/json");
    ASSERT_TRUE(busy);
    EXPECT_EQ(busy->status, 503);
    EXPECT_EQ(busy->get_header_value("Retry-After"), "1");
  }
  const auto t0 = std::chrono::steady_clock::now();
  std::thread stopper([&] { s.stop(); });
  auto r = waiting.read_response(10s);
  stopper.join();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 503) << r->body;
  std::string message;
  EXPECT_TRUE(test::is_openai_error(r->body, &message));
  EXPECT_NE(message.find("shutting down"), std::string::npos) << message;
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 3.0);
}

}  // namespace
}  // namespace kiln::serve
