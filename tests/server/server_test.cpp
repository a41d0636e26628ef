// The HTTP server in-process on a free loopback port, against the qwen2 fixture (which has a
// chat template): real requests through httplib's client, greedy outputs compared with what a
// Context gives directly for the same prompt.
#include <gtest/gtest.h>
#include "http_client.h"

#include <nlohmann/json.hpp>
#include <algorithm>
#include <atomic>
#include <thread>

#include "greedy_reference.h"
#include "serve/engine.h"
#include "serve/server.h"
#include "test_data.h"

namespace kiln::serve {
namespace {

using nlohmann::json;

const std::string kModel = kiln::test_data::path("models/qwen2-e64-Q8_0.gguf");
constexpr int64_t kCtx = 512;  // 4 slots of 128 tokens

std::shared_ptr<const Model> model() {
  static auto m = Model::load(kModel);
  EXPECT_TRUE(m.ok()) << (m.ok() ? "" : m.error().message);
  return *m;
}

// Greedy pieces for a prompt straight from a Context (the reference).
std::vector<std::string> direct_greedy(const std::string& prompt, int n, std::shared_ptr<const Model> m = model()) {
  return test::pieces_of(test::greedy_reference(m, m->tokenizer().tokenize(prompt, true, true), n));
}

std::string join(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& p : v) s += p;
  return s;
}

class ServerTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    ServerOptions o;
    o.n_parallel = 4;
    o.queue_limit = 8;
    o.n_threads = 2;
    o.context.n_ctx = kCtx;
    server_ = new Server(o);
    auto port = server_->listen("127.0.0.1", 0);
    ASSERT_TRUE(port.ok());
    port_ = *port;
    {
      httplib::Client c("127.0.0.1", port_);
      auto r = c.Get("/health");
      ASSERT_TRUE(r);
      EXPECT_EQ(r->status, 503);  // not attached yet: loading
    }
    ASSERT_TRUE(server_->attach(model()).ok());
  }
  static void TearDownTestSuite() {
    server_->stop();
    delete server_;
  }

  static httplib::Result post(const std::string& path, const json& body) {
    httplib::Client c("127.0.0.1", port_);
    c.set_read_timeout(60);
    return c.Post(path.c_str(), body.dump(), "application/json");
  }
  // The SSE events of a streaming request ("[DONE]" included as a string).
  static std::vector<json> stream(const std::string& path, json body) {
    body["stream"] = true;
    auto r = post(path, body);
    EXPECT_TRUE(r);
    EXPECT_EQ(r->status, 200);
    std::vector<json> events;
    size_t at = 0;
    while ((at = r->body.find("data: ", at)) != std::string::npos) {
      const size_t end = r->body.find("\n\n", at);
      const std::string data = r->body.substr(at + 6, end - at - 6);
      events.push_back(data == "[DONE]" ? json("[DONE]") : json::parse(data));
      at = end;
    }
    return events;
  }
  static bool all_idle() {
    httplib::Client c("127.0.0.1", port_);
    auto r = c.Get("/slots");
    if (!r || r->status != 200) return false;
    for (const auto& s : json::parse(r->body))
      if (s["is_processing"].get<bool>()) return false;
    return true;
  }

  static Server* server_;
  static int port_;
};
Server* ServerTest::server_ = nullptr;
int ServerTest::port_ = 0;

const char* kPrompt = "The quick brown fox";

TEST_F(ServerTest, HealthAndModels) {
  httplib::Client c("127.0.0.1", port_);
  auto r = c.Get("/v1/health");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  r = c.Get("/v1/models");
  ASSERT_TRUE(r);
  EXPECT_EQ(json::parse(r->body)["data"][0]["id"], model()->name());
}

TEST_F(ServerTest, GreedyCompletionMatchesContext) {
  const auto expect = direct_greedy(kPrompt, 12);
  auto r = post("/v1/completions", {{"model", "anything"}, {"prompt", kPrompt}, {"max_tokens", 12}, {"temperature", 0}});
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  const json j = json::parse(r->body);
  EXPECT_EQ(j["model"], model()->name());
  EXPECT_EQ(j["object"], "text_completion");
  EXPECT_EQ(j["choices"][0]["text"], join(expect));
  EXPECT_EQ(j["choices"][0]["finish_reason"], expect.size() == 12 ? "length" : "stop");
  EXPECT_EQ(j["usage"]["completion_tokens"], static_cast<int>(expect.size()));
  EXPECT_EQ(j["usage"]["prompt_tokens"], static_cast<int>(model()->tokenizer().tokenize(kPrompt, true, true).size()));

  // The same prompt again reuses the slot's cache.
  auto again = post("/v1/completions", {{"prompt", kPrompt}, {"max_tokens", 12}, {"temperature", 0}});
  const json j2 = json::parse(again->body);
  EXPECT_EQ(j2["choices"][0]["text"], join(expect));
  EXPECT_GT(j2["usage"]["prompt_tokens_details"]["cached_tokens"].get<int>(), 0);
}

TEST_F(ServerTest, StreamingCompletionMatches) {
  const auto expect = direct_greedy(kPrompt, 10);
  auto events = stream("/v1/completions", {{"prompt", kPrompt}, {"max_tokens", 10}, {"temperature", 0},
                                           {"stream_options", {{"include_usage", true}}}});
  ASSERT_GE(events.size(), 3u);
  EXPECT_EQ(events.back(), "[DONE]");
  std::string text;
  std::string finish;
  bool saw_usage = false;
  for (const auto& e : events) {
    if (e.is_string()) continue;
    if (e.contains("usage")) {
      saw_usage = true;
      EXPECT_EQ(e["usage"]["completion_tokens"], static_cast<int>(expect.size()));
      continue;
    }
    text += e["choices"][0]["text"].get<std::string>();
    if (!e["choices"][0]["finish_reason"].is_null()) finish = e["choices"][0]["finish_reason"];
  }
  EXPECT_TRUE(saw_usage);
  EXPECT_EQ(text, join(expect));
  EXPECT_EQ(finish, expect.size() == 10 ? "length" : "stop");
}

TEST_F(ServerTest, ChatMatchesTemplatePrompt) {
  // The fixture's template (system prompt added when absent), rendered by hand.
  const std::string prompt =
      "<|im_start|>system\nYou are a helpful assistant<|im_end|>\n<|im_start|>user\nHi\nthere<|im_end|>\n"
      "<|im_start|>assistant\n";
  const auto expect = direct_greedy(prompt, 8);
  // Text parts are joined into one string content (with "\n" between parts, as llama-server does).
  const json body = {{"messages", {{{"role", "user"}, {"content", {{{"type", "text"}, {"text", "Hi"}},
                                                                   {{"type", "text"}, {"text", "there"}}}}}}},
                     {"max_completion_tokens", 8}, {"temperature", 0}};
  auto r = post("/v1/chat/completions", body);
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  const json j = json::parse(r->body);
  EXPECT_EQ(j["object"], "chat.completion");
  EXPECT_EQ(j["choices"][0]["message"]["role"], "assistant");
  EXPECT_EQ(j["choices"][0]["message"]["content"], join(expect));

  auto events = stream("/v1/chat/completions", body);
  std::string text;
  for (const auto& e : events)
    if (e.is_object() && e["choices"][0]["delta"].contains("content"))
      text += e["choices"][0]["delta"]["content"].get<std::string>();
  EXPECT_EQ(events.front()["choices"][0]["delta"]["role"], "assistant");
  EXPECT_EQ(text, join(expect));
}

TEST_F(ServerTest, StopStringAcrossTokenBoundary) {
  const auto pieces = direct_greedy(kPrompt, 16);
  // A stop string made of the end of one piece and the start of the next.
  size_t k = 0;
  auto ascii = [](const std::string& p) {
    return !p.empty() && std::all_of(p.begin(), p.end(), [](char c) { return c > 0x20 && c < 0x7f; });
  };
  while (k + 2 < pieces.size() && !(ascii(pieces[k]) && ascii(pieces[k + 1]))) ++k;
  ASSERT_LT(k + 2, pieces.size());
  const std::string stop = pieces[k].substr(pieces[k].size() - 1) + pieces[k + 1].substr(0, 1);
  const std::string full = join(pieces);
  const std::string expect = full.substr(0, full.find(stop));
  auto r = post("/v1/completions", {{"prompt", kPrompt}, {"max_tokens", 16}, {"temperature", 0}, {"stop", {"@@never", stop}}});
  ASSERT_TRUE(r);
  const json j = json::parse(r->body);
  EXPECT_EQ(j["choices"][0]["text"], expect);
  EXPECT_EQ(j["choices"][0]["finish_reason"], "stop");

  auto events = stream("/v1/completions", {{"prompt", kPrompt}, {"max_tokens", 16}, {"temperature", 0}, {"stop", stop}});
  std::string text;
  for (const auto& e : events)
    if (e.is_object()) text += e["choices"][0]["text"].get<std::string>();
  EXPECT_EQ(text, expect);
}

// One greedy completion's tokens with the two most likely candidates at each step.
struct GreedyTrace {
  std::vector<std::string> tokens;
  std::vector<std::vector<std::pair<std::string, double>>> top2;  // best first
};

GreedyTrace greedy_trace(int port, const std::string& prompt, int n) {
  httplib::Client c("127.0.0.1", port);
  c.set_read_timeout(60);
  auto r = c.Post("/v1/completions",
                  json{{"prompt", prompt}, {"max_tokens", n}, {"temperature", 0}, {"logprobs", 2}}.dump(),
                  "application/json");
  GreedyTrace t;
  if (!r || r->status != 200) return t;
  const json lp = json::parse(r->body)["choices"][0]["logprobs"];
  for (const auto& tok : lp["tokens"]) t.tokens.push_back(tok.get<std::string>());
  for (const auto& top : lp["top_logprobs"]) {
    std::vector<std::pair<std::string, double>> v;
    for (const auto& [piece, logprob] : top.items()) v.emplace_back(piece, logprob.get<double>());
    std::sort(v.begin(), v.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
    t.top2.push_back(std::move(v));
  }
  return t;
}

// Concurrent requests share batches and the KV cache, so their logits differ from a lone
// request's in the last bits (the float order of the batched kernels and of the attention over
// the cache's cells depends on the batch, as in llama.cpp). Each concurrent completion must
// therefore equal the lone one token for token, except that from a step where the lone run's two
// best candidates were all but tied (within kTie), it may take the other one and go its own way.
TEST(ServerConcurrency, ConcurrentRequestsMatchAlone) {
  constexpr double kTie = 1e-3;  // logprob margin; batch effects are ~1e-5
  constexpr int kTokens = 16;
  auto m = Model::load(KILN_SOURCE_DIR "/models/kjv-llama-q8_0.gguf");
  ASSERT_TRUE(m.ok()) << m.error().message;
  ServerOptions o;
  o.n_parallel = 4;
  o.n_threads = 2;
  o.context.n_ctx = 512;
  Server server(o);
  auto port = server.listen("127.0.0.1", 0);
  ASSERT_TRUE(port.ok());
  ASSERT_TRUE(server.attach(*m).ok());
  const std::vector<std::string> prompts = {"In the beginning", "And God said", "The LORD is my shepherd",
                                            "And it came to pass", "Blessed are", "Then said Jesus"};
  std::vector<GreedyTrace> alone;
  for (const auto& p : prompts) {
    alone.push_back(greedy_trace(*port, p, kTokens));
    EXPECT_EQ(join(alone.back().tokens), join(direct_greedy(p, kTokens, *m))) << p;
    ASSERT_EQ(alone.back().top2.size(), alone.back().tokens.size()) << p;
  }
  std::vector<GreedyTrace> got(prompts.size());
  std::vector<std::thread> threads;
  for (size_t i = 0; i < prompts.size(); ++i)
    threads.emplace_back([&, i] { got[i] = greedy_trace(*port, prompts[i], kTokens); });
  for (auto& t : threads) t.join();
  int identical = 0;
  for (size_t i = 0; i < prompts.size(); ++i) {
    const GreedyTrace& a = alone[i];
    const GreedyTrace& g = got[i];
    ASSERT_FALSE(g.tokens.empty()) << prompts[i] << ": the concurrent request failed";
    size_t s = 0;
    while (s < a.tokens.size() && s < g.tokens.size() && a.tokens[s] == g.tokens[s]) {
      EXPECT_NEAR(g.top2[s][0].second, a.top2[s][0].second, kTie) << prompts[i] << " step " << s;
      ++s;
    }
    if (s == a.tokens.size() && s == g.tokens.size()) {
      ++identical;
      continue;
    }
    ASSERT_LT(s, a.tokens.size()) << prompts[i] << ": the concurrent completion runs on past the lone one";
    ASSERT_GE(a.top2[s].size(), 2u);
    EXPECT_LT(a.top2[s][0].second - a.top2[s][1].second, kTie)
        << prompts[i] << ": concurrent took '" << (s < g.tokens.size() ? g.tokens[s] : "<end>")
        << "' at step " << s << " where the lone request's '" << a.tokens[s] << "' led by a clear margin";
    if (s < g.tokens.size()) {
      EXPECT_EQ(g.tokens[s], a.top2[s][1].first) << prompts[i] << " step " << s;
    }
  }
  // The default model's greedy choices mostly have clear margins: a tie in every prompt would
  // mean the comparison no longer tests anything.
  EXPECT_GE(identical, static_cast<int>(prompts.size()) / 2);
  server.stop();
}

TEST_F(ServerTest, DisconnectingStreamFreesItsSlot) {
  httplib::Client c("127.0.0.1", port_);
  httplib::Request req;
  req.method = "POST";
  req.path = "/v1/completions";
  req.body = json{{"prompt", kPrompt}, {"max_tokens", 100000}, {"temperature", 1.0}, {"stream", true},
                  {"logit_bias", {{std::to_string(model()->tokenizer().eos()), -1e9}}}}.dump();
  req.set_header("Content-Type", "application/json");
  int chunks = 0;
  req.content_receiver = [&](const char*, size_t, uint64_t, uint64_t) { return ++chunks < 3; };
  auto r = c.send(req);
  EXPECT_GE(chunks, 3);
  bool idle = false;
  for (int i = 0; i < 200 && !(idle = all_idle()); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(25));
  EXPECT_TRUE(idle);
}

TEST_F(ServerTest, ErrorsHaveOpenAiShape) {
  httplib::Client c("127.0.0.1", port_);
  auto check = [](const httplib::Result& r, int status, const std::string& needle) {
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, status) << r->body;
    const json j = json::parse(r->body);
    EXPECT_EQ(j["error"]["code"], status);
    EXPECT_TRUE(j["error"]["type"].is_string());
    EXPECT_NE(j["error"]["message"].get<std::string>().find(needle), std::string::npos) << r->body;
  };
  check(c.Post("/v1/completions", "{not json", "application/json"), 400, "JSON");
  check(post("/v1/completions", {{"prompt", 5}}), 400, "prompt");
  check(post("/v1/completions", {{"prompt", "x"}, {"temperature", "hot"}}), 400, "temperature");
  check(post("/v1/completions", {{"prompt", "x"}, {"stop", {1, 2}}}), 400, "stop");
  check(post("/v1/chat/completions", {{"messages", "hi"}}), 400, "messages");
  check(post("/v1/chat/completions", {{"messages", {{{"role", "user"}, {"content", {{{"type", "image_url"}}}}}}}}), 400, "image_url");
  check(post("/v1/completions", {{"prompt", "x"}, {"max_tokens", 0}}), 400, "max_tokens");
  check(post("/v1/completions", {{"prompt", "x"}, {"logit_bias", {{"-3", 1}}}}), 400, "logit_bias");
  check(post("/v1/chat/completions", {{"messages", {{{"role", "user"}, {"content", "x"}}}}, {"tools", {{{"type", "function"}}}}}), 400, "tools");
  check(post("/v1/chat/completions", {{"messages", {{{"role", "user"}, {"content", "x"}}}}, {"n", 17}}), 400, "'n'");
  check(post("/v1/chat/completions", {{"messages", {{{"role", "user"}, {"content", "x"}}}}, {"response_format", {{"type", "xml"}}}}), 400, "response_format");
  std::string long_prompt;
  for (int i = 0; i < 300; ++i) long_prompt += " word";
  check(post("/v1/completions", {{"prompt", long_prompt}}), 400, "context");
  // Accepted and ignored.
  auto ok = post("/v1/chat/completions", {{"messages", {{{"role", "user"}, {"content", "x"}}}}, {"tools", json::array()},
                                          {"user", "u"}, {"metadata", {{"k", "v"}}}, {"store", false}, {"max_tokens", 2}});
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->status, 200) << ok->body;
}

TEST_F(ServerTest, TokenizeRoundTrip) {
  auto r = post("/tokenize", {{"content", "Hello world"}});
  ASSERT_TRUE(r);
  const json tokens = json::parse(r->body)["tokens"];
  EXPECT_EQ(tokens.get<std::vector<int32_t>>(), model()->tokenizer().tokenize("Hello world", false, true));
  auto d = post("/detokenize", {{"tokens", tokens}});
  EXPECT_EQ(json::parse(d->body)["content"], "Hello world");
  auto pieces = post("/tokenize", {{"content", "Hello world"}, {"with_pieces", true}});
  std::string joined;
  ASSERT_TRUE(pieces);
  const json with_pieces = json::parse(pieces->body);
  for (const auto& t : with_pieces["tokens"]) joined += t["piece"].get<std::string>();
  EXPECT_EQ(joined, "Hello world");
  auto bad = post("/detokenize", {{"tokens", {1 << 30}}});
  EXPECT_EQ(bad->status, 400);
}

TEST(ServerAuth, ApiKeyGuardsEveryRouteButHealth) {
  ServerOptions o;
  o.n_parallel = 1;
  o.n_threads = 1;
  o.api_key = "sekret";
  o.context.n_ctx = 128;
  Server s(o);
  auto port = s.listen("127.0.0.1", 0);
  ASSERT_TRUE(port.ok());
  ASSERT_TRUE(s.attach(model()).ok());
  httplib::Client c("127.0.0.1", *port);
  EXPECT_EQ(c.Get("/health")->status, 200);
  auto denied = c.Get("/v1/models");
  EXPECT_EQ(denied->status, 401);
  EXPECT_EQ(json::parse(denied->body)["error"]["code"], 401);
  EXPECT_EQ(c.Get("/v1/models", {{"Authorization", "Bearer sekret"}})->status, 200);
  EXPECT_EQ(c.Get("/v1/models", {{"Authorization", "Bearer wrong"}})->status, 401);
  s.stop();
}

}  // namespace
}  // namespace kiln::serve

namespace kiln::serve {
namespace {

// One slot, no queue: a second request while the first streams is answered 503; when the
// streaming client goes away its slot frees and requests succeed again.
TEST(ServerOverload, FullQueueAnswers503) {
  ServerOptions o;
  o.n_parallel = 1;
  o.queue_limit = 0;
  o.n_threads = 1;
  o.context.n_ctx = 2048;
  Server s(o);
  auto port = s.listen("127.0.0.1", 0);
  ASSERT_TRUE(port.ok());
  ASSERT_TRUE(s.attach(model()).ok());
  std::atomic<bool> release{false};
  std::thread streamer([&] {
    httplib::Client c("127.0.0.1", *port);
    httplib::Request req;
    req.method = "POST";
    req.path = "/v1/completions";
    req.body = json{{"prompt", "x"}, {"stream", true}, {"temperature", 1.0}, {"seed", 1},
                    {"logit_bias", {{std::to_string(model()->tokenizer().eos()), -1e9}}}}.dump();
    req.set_header("Content-Type", "application/json");
    req.content_receiver = [&](const char*, size_t, uint64_t, uint64_t) { return !release.load(); };
    (void)c.send(req);
  });
  httplib::Client c("127.0.0.1", *port);
  bool busy = false;
  for (int i = 0; i < 400 && !busy; ++i) {
    auto r = c.Get("/slots");
    busy = r && json::parse(r->body)[0]["is_processing"].get<bool>();
    if (!busy) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ASSERT_TRUE(busy);
  auto r = c.Post("/v1/completions", json{{"prompt", "y"}, {"max_tokens", 2}}.dump(), "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 503);
  EXPECT_EQ(json::parse(r->body)["error"]["code"], 503);
  release = true;
  streamer.join();
  // The slot frees because the client went away, long before its 2048-token context fills.
  int n_cached = -1;
  for (int i = 0; i < 400; ++i) {
    auto slots = c.Get("/slots");
    const json j = json::parse(slots->body);
    if (!j[0]["is_processing"].get<bool>()) {
      n_cached = j[0]["n_cached"];
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  EXPECT_GE(n_cached, 1);
  EXPECT_LT(n_cached, 1500);
  int status = 0;
  for (int i = 0; i < 200 && status != 200; ++i) {
    auto again = c.Post("/v1/completions", json{{"prompt", "y"}, {"max_tokens", 2}}.dump(), "application/json");
    status = again ? again->status : 0;
    if (status != 200) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_EQ(status, 200);
  s.stop();
}

}  // namespace
}  // namespace kiln::serve

namespace kiln::serve {
namespace {

// A prompt longer than one step's chunk (kPromptChunk) is decoded over several steps and gives
// the same greedy text as decoding it directly.
TEST(ServerChunking, LongPromptInChunks) {
  ServerOptions o;
  o.n_parallel = 1;
  o.n_threads = 2;
  o.context.n_ctx = 1024;
  Server s(o);
  auto port = s.listen("127.0.0.1", 0);
  ASSERT_TRUE(port.ok());
  ASSERT_TRUE(s.attach(model()).ok());
  std::string prompt;
  for (int i = 0; i < 150; ++i) prompt += "one two three four ";
  const size_t n_prompt = model()->tokenizer().tokenize(prompt, true, true).size();
  ASSERT_GT(n_prompt, kPromptChunk);
  ASSERT_LT(n_prompt + 8, 1024u);
  httplib::Client c("127.0.0.1", *port);
  c.set_read_timeout(60);
  auto r = c.Post("/v1/completions", json{{"prompt", prompt}, {"max_tokens", 6}, {"temperature", 0}}.dump(), "application/json");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  EXPECT_EQ(json::parse(r->body)["choices"][0]["text"], join(direct_greedy(prompt, 6)));
  s.stop();
}

}  // namespace
}  // namespace kiln::serve
