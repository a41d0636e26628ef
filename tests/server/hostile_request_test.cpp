// Requests built to take the server down (issue 30), against an in-process server on the loopback
// (the qwen2 fixture, Qwen2.5's chat template): each is answered (a 400 that names the limit, or
// a bounded answer), and the server still serves a normal request afterwards.
#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>

#include "chat/chat_test_util.h"
#include "in_process_server.h"
#include "serve/server.h"
#include "time_scale.h"

namespace kiln::serve {
namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  EXPECT_TRUE(in.good()) << path;
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

class HostileRequestTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    ServerOptions o;
    o.n_parallel = 2;
    o.queue_limit = 4;
    o.n_threads = 2;
    o.context.n_ctx = 1024;
    o.chat_template_source = read_file(chat::testing::template_path("Qwen-Qwen2.5-7B-Instruct.jinja"));
    server_ = test::start_server(o, test::qwen2_model(), &port_).release();
    ASSERT_NE(server_, nullptr);
  }
  static void TearDownTestSuite() { delete server_; }

  // The answer to one POST: status and the error message (empty for a 200).
  static std::pair<int, std::string> post(const std::string& path, const json& body) {
    auto r = test::post_json(port_, path, body);
    if (!r) return {0, "no answer"};
    if (r->status == 200) return {200, ""};
    const json e = json::parse(r->body, nullptr, false);
    return {r->status, e.is_object() && e.contains("error") ? e["error"]["message"].get<std::string>() : r->body};
  }

  // A short completion still works.
  static void expect_serves(const std::string& after) {
    const auto [status, message] =
        post("/v1/completions", {{"prompt", "Hello"}, {"max_tokens", 2}, {"temperature", 0}});
    EXPECT_EQ(status, 200) << after << ": " << message;
  }

  static Server* server_;
  static int port_;
};
Server* HostileRequestTest::server_ = nullptr;
int HostileRequestTest::port_ = 0;

const json kUser = {{"role", "user"}, {"content", "x"}};

// {"$ref": "#/$defs/a0", "$defs": {"a0": {"$ref": "#/$defs/a1"}, ...}}, `n` references long.
json ref_chain(int n) {
  json defs = json::object();
  for (int i = 0; i + 1 < n; ++i) defs["a" + std::to_string(i)] = {{"$ref", "#/$defs/a" + std::to_string(i + 1)}};
  defs["a" + std::to_string(n - 1)] = {{"type", "string"}};
  return {{"$ref", "#/$defs/a0"}, {"$defs", defs}};
}

// Finding 1: a $ref chain 10,000 long (358 KB) killed the server with SIGSEGV, on every route that
// takes a schema.
TEST_F(HostileRequestTest, SchemaRefChainIs400) {
  const json schema = ref_chain(10'000);
  ASSERT_GT(schema.dump().size(), 300'000u);
  const std::vector<std::pair<std::string, json>> cases = {
      {"/completion", {{"prompt", "x"}, {"json_schema", schema}}},
      {"/v1/completions", {{"prompt", "x"}, {"json_schema", schema}}},
      {"/v1/chat/completions",
       {{"messages", {kUser}},
        {"response_format", {{"type", "json_schema"}, {"json_schema", {{"name", "x"}, {"schema", schema}}}}}}},
  };
  for (const auto& [path, body] : cases) {
    const auto start = Clock::now();
    const auto [status, message] = post(path, body);
    EXPECT_EQ(status, 400) << path << ": " << message;
    EXPECT_NE(message.find("schemas nest deeper than 128 levels"), std::string::npos) << path << ": " << message;
    EXPECT_LT(seconds_since(start), 2.0 * kiln::test::time_scale()) << path;
  }
  expect_serves("a $ref chain");
}

// Tool-call arguments are JSON inside a string, beyond the body's nesting check: nested 35,000 deep
// they reached the template's JSON writer and the recursion of the values it walks.
TEST_F(HostileRequestTest, DeepToolCallArgumentsAre400) {
  const std::string deep = std::string(35'000, '[') + std::string(35'000, ']');
  const json call = {{"id", "c1"}, {"type", "function"}, {"function", {{"name", "f"}, {"arguments", deep}}}};
  const json messages = {kUser,
                         {{"role", "assistant"}, {"content", nullptr}, {"tool_calls", {call}}},
                         {{"role", "tool"}, {"tool_call_id", "c1"}, {"content", "1"}}};
  const auto [status, message] = post("/v1/chat/completions", {{"messages", messages}, {"max_tokens", 1}});
  EXPECT_EQ(status, 400) << message;
  EXPECT_NE(message.find("deeper than 512 levels"), std::string::npos) << message;
  expect_serves("deep tool-call arguments");
}

// Finding 5: a prompt that cannot fit a slot is refused before it is tokenized (a 10 MB chat spent
// 6 s and 583 MB tokenizing before its 400): the message gives the least count its bytes allow.
TEST_F(HostileRequestTest, PromptTooLongForASlotIsRefusedBeforeTokenizing) {
  std::string words;
  for (int i = 0; i < 200'000; ++i) words += "word ";
  const std::vector<std::pair<std::string, json>> cases = {
      {"/completion", {{"prompt", words}, {"n_predict", 1}}},
      {"/v1/completions", {{"prompt", {"x", words}}, {"max_tokens", 1}}},
      {"/v1/chat/completions", {{"messages", {{{"role", "user"}, {"content", words}}}}, {"max_tokens", 1}}},
  };
  for (const auto& [path, body] : cases) {
    const auto [status, message] = post(path, body);
    EXPECT_EQ(status, 400) << path << ": " << message;
    EXPECT_NE(message.find("the prompt has at least "), std::string::npos) << path << ": " << message;
    EXPECT_NE(message.find("more than a slot's context of 512"), std::string::npos)
        << path << ": " << message;
  }
  expect_serves("a prompt too long for a slot");
}

// Finding 5: the work before the queue holds 64 bytes a byte of its body from the server's
// prequeue_bytes; a body that alone needs more is a 413 naming it, and the server goes on.
TEST(HostilePrequeue, WorkBeforeTheQueueIsBounded) {
  ServerOptions o;
  o.n_parallel = 1;
  o.n_threads = 2;
  o.context.n_ctx = 256;
  o.prequeue_bytes = size_t{4} << 20;
  int port = 0;
  auto server = test::start_server(o, test::qwen2_model(), &port);
  ASSERT_NE(server, nullptr);
  const std::string content(100'000, 'a');  // 6.4 MB of work at 64 bytes a byte
  for (const std::string path : {"/tokenize", "/completion", "/v1/chat/completions", "/apply-template"}) {
    const json body = {
        {"content", content}, {"prompt", content}, {"messages", {{{"role", "user"}, {"content", content}}}}};
    auto r = test::post_json(port, path, body);
    ASSERT_TRUE(r) << path;
    EXPECT_EQ(r->status, 413) << path << ": " << r->body;
    EXPECT_NE(r->body.find("of work before the queue, more than the 4 MiB the server gives it"),
              std::string::npos)
        << path << ": " << r->body;
  }
  EXPECT_EQ(server->prequeue_memory().in_use(), 0u);
  auto small = test::post_json(port, "/tokenize", {{"content", "Hello world"}, {"with_pieces", true}});
  ASSERT_TRUE(small);
  EXPECT_EQ(small->status, 200) << small->body;
  // The hold ends when the handler returns, just after the answer is written: the client may read
  // the answer first, so the hold must be given back within a bounded wait, not at once.
  const auto deadline = Clock::now() + std::chrono::duration<double>(5 * test::time_scale());
  while (server->prequeue_memory().in_use() != 0 && Clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  EXPECT_EQ(server->prequeue_memory().in_use(), 0u);
}

}  // namespace
}  // namespace kiln::serve
