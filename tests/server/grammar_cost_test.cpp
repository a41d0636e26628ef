// A grammar's work per token is bounded (issue 30, finding 3: `root ::= "a"?` repeated 5,000 times
// cost 38 s a token and every other client waited): against in-process servers on the loopback
// (the qwen2 fixture), a grammar over its budget is a 400 naming the limit, from the start or
// in the middle of a generation, while another request completes within 2 s; and a costly token
// (a server with a budget too large to end it) stops when its client disconnects and when the
// server stops.
#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>

#include "in_process_server.h"
#include "serve/server.h"
#include "time_scale.h"

namespace kiln::serve {
namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// `prefix` then `n` optional "a"s: every optional can start the text, so the parse positions
// after the prefix are n + 1 and each token's work grows with n^2 and more.
std::string optionals_after(const std::string& prefix, int n) {
  std::string text = "root ::= " + prefix;
  for (int i = 0; i < n; ++i) text += " \"a\"?";
  return text + "\n";
}

// Cheap until the text is "hello", costly from the next token on.
const std::string kCostlyLater = optionals_after("\"hello\"", 5000);

// speculative: with n-gram speculation, whose verification samples a grammar's tokens on the
// engine's thread (not on a thread aside): the per-token budget alone bounds what others wait.
ServerOptions options(uint64_t grammar_work_limit, bool speculative = false) {
  ServerOptions o;
  o.n_parallel = 2;
  o.n_threads = 2;
  o.context.n_ctx = 512;
  o.grammar_work_limit = grammar_work_limit;
  if (speculative) o.speculative.sources = {DraftSource::NgramSimple};
  return o;
}

json completion(const std::string& grammar) {
  return {{"prompt", "Say hello"}, {"grammar", grammar}, {"n_predict", 8}, {"temperature", 0}};
}

std::pair<int, std::string> status_and_message(const httplib::Result& r) {
  if (!r) return {0, "no answer"};
  const json e = json::parse(r->body, nullptr, false);
  return {r->status, e.is_object() && e.contains("error") ? e["error"]["message"].get<std::string>() : ""};
}

// A short completion, timed.
double timed_completion(int port) {
  const auto start = Clock::now();
  auto r =
      test::post_json(port, "/v1/completions", {{"prompt", "Hello"}, {"max_tokens", 4}, {"temperature", 0}});
  EXPECT_TRUE(r && r->status == 200);
  return seconds_since(start);
}

bool all_idle(int port) {
  httplib::Client c("127.0.0.1", port);
  auto r = c.Get("/slots");
  if (!r || r->status != 200) return false;
  for (const auto& s : json::parse(r->body))
    if (s["is_processing"].get<bool>()) return false;
  return true;
}

class GrammarCostWithAndWithoutSpeculation : public ::testing::TestWithParam<bool> {};

TEST_P(GrammarCostWithAndWithoutSpeculation, OverTheBudgetIs400WhileOthersServe) {
  int port = 0;
  auto server =
      test::start_server(options(grammar::WorkBudget::kDefaultLimit, GetParam()), test::qwen2_model(), &port);
  ASSERT_NE(server, nullptr);
  // Costly from the first token: refused before it is queued.
  const auto start = Clock::now();
  const auto [status, message] =
      status_and_message(test::post_json(port, "/completion", completion(optionals_after("", 5000))));
  EXPECT_EQ(status, 400) << message;
  EXPECT_NE(message.find("units of grammar work"), std::string::npos) << message;
  EXPECT_LT(seconds_since(start), 5.0 * test::time_scale());
  // Costly after "hello": the generation fails in the engine, with the same 400, while a normal
  // request beside it completes within 2 s.
  auto costly = std::async(std::launch::async, [&] {
    return status_and_message(test::post_json(port, "/completion", completion(kCostlyLater)));
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_LT(timed_completion(port), 2.0 * test::time_scale());
  const auto [later_status, later_message] = costly.get();
  EXPECT_EQ(later_status, 400) << later_message;
  EXPECT_NE(later_message.find("units of grammar work"), std::string::npos) << later_message;
  EXPECT_LT(timed_completion(port), 2.0 * test::time_scale());
}

INSTANTIATE_TEST_SUITE_P(GrammarCost, GrammarCostWithAndWithoutSpeculation, ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool>& info) {
                           return info.param ? "Speculative" : "Plain";
                         });

// With a budget no token reaches, "hello" + 5,000 optionals costs tens of seconds a token: the
// work in progress must stop at a disconnect and at the server's stop.
TEST(GrammarCost, DisconnectAndStopInterruptACostlyToken) {
  int port = 0;
  auto server = test::start_server(options(uint64_t{1} << 50), test::qwen2_model(), &port);
  ASSERT_NE(server, nullptr);
  {
    httplib::Client impatient("127.0.0.1", port);
    impatient.set_read_timeout(1, 0);
    auto r = impatient.Post("/completion", completion(kCostlyLater).dump(), "application/json");
    EXPECT_FALSE(r);  // it gave up and closed its connection
  }
  const auto gone = Clock::now();
  bool idle = false;
  while (!(idle = all_idle(port)) && seconds_since(gone) < 3.0 * test::time_scale())
    std::this_thread::sleep_for(std::chrono::milliseconds(25));
  EXPECT_TRUE(idle) << "the disconnected request still holds its slot";
  EXPECT_LT(timed_completion(port), 2.0 * test::time_scale());

  auto costly = std::async(std::launch::async, [&] {
    return status_and_message(test::post_json(port, "/completion", completion(kCostlyLater)));
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));  // well inside its costly token
  const auto stop = Clock::now();
  server->stop();
  EXPECT_LT(seconds_since(stop), 5.0 * test::time_scale());  // `kiln serve` exits 0 within 5 s of SIGTERM
  const auto [status, message] = costly.get();
  EXPECT_EQ(status, 503) << message;
}

}  // namespace
}  // namespace kiln::serve
