// The generation side of the server (issue 5), in-process against the qwen2 fixture: logprobs
// against a log-softmax computed here from Context::logits for the same tokens, n > 1 choices,
// llama-server's native /completion (text, token-id prompts, streaming, n_probs, stop words),
// /metrics counters, field errors, and a non-streaming client that disconnects.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <thread>

#include "greedy_reference.h"
#include "http_client.h"
#include "in_process_server.h"
#include "serve/server.h"
#include "test_data.h"

namespace kiln::serve {
namespace {

using nlohmann::json;

const std::string kModel = kiln::test_data::path("models/qwen2-e64-Q8_0.gguf");

std::shared_ptr<const Model> model() {
  static auto m = Model::load(kModel);
  EXPECT_TRUE(m.ok()) << (m.ok() ? "" : m.error().message);
  return *m;
}

// The greedy reference for `ids`, with every step's log-softmax.
std::vector<test::GreedyStep> reference(const std::vector<int32_t>& ids, int n) {
  return test::greedy_reference(model(), ids, n);
}

std::vector<double> sorted_desc(std::vector<double> v) {
  std::sort(v.begin(), v.end(), std::greater<>());
  return v;
}

json bytes_of(const std::string& s) {
  json out = json::array();
  for (unsigned char c : s) out.push_back(c);
  return out;
}

// A server of its own for tests that need other slot shapes.
struct OwnServer {
  Server server;
  int port = 0;
  OwnServer(int32_t n_parallel, int64_t n_ctx)
      : server([&] {
          ServerOptions o;
          o.n_parallel = n_parallel;
          o.n_threads = 2;
          o.context.n_ctx = n_ctx;
          return o;
        }()) {
    auto p = server.listen("127.0.0.1", 0);
    EXPECT_TRUE(p.ok());
    port = p.ok() ? *p : 0;
    EXPECT_TRUE(server.attach(model()).ok());
  }
  ~OwnServer() { server.stop(); }
  json slots() {
    httplib::Client c("127.0.0.1", port);
    auto r = c.Get("/slots");
    return r && r->status == 200 ? json::parse(r->body) : json::array();
  }
};

json post_ok_to(int port, const std::string& path, const json& body) {
  auto r = test::post_json(port, path, body);
  EXPECT_TRUE(r);
  if (!r) return json();
  EXPECT_EQ(r->status, 200) << r->body;
  return json::parse(r->body);
}

// The SSE events of a streaming request ("[DONE]" as a string).
std::vector<json> stream_from(int port, const std::string& path, json body) {
  body["stream"] = true;
  auto r = test::post_json(port, path, body);
  EXPECT_TRUE(r);
  if (!r) return {};
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

class CompletionsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    // One slot: each request decodes alone, in batches shaped as the reference Context's.
    ServerOptions o;
    o.n_parallel = 1;
    o.queue_limit = 8;
    o.n_threads = 2;
    o.context.n_ctx = 512;
    server_ = new Server(o);
    auto port = server_->listen("127.0.0.1", 0);
    ASSERT_TRUE(port.ok());
    port_ = *port;
    ASSERT_TRUE(server_->attach(model()).ok());
  }
  static void TearDownTestSuite() {
    server_->stop();
    delete server_;
  }
  static httplib::Result post(const std::string& path, const json& body) {
    return test::post_json(port_, path, body);
  }
  static json post_ok(const std::string& path, const json& body) { return post_ok_to(port_, path, body); }
  static std::vector<json> stream(const std::string& path, json body) {
    return stream_from(port_, path, body);
  }
  static std::string metrics() {
    httplib::Client c("127.0.0.1", port_);
    auto r = c.Get("/metrics");
    EXPECT_TRUE(r);
    if (!r) return {};
    EXPECT_EQ(r->status, 200);
    EXPECT_EQ(r->get_header_value("Content-Type"), "text/plain; version=0.0.4");
    return r->body;
  }
  static Server* server_;
  static int port_;
};
Server* CompletionsTest::server_ = nullptr;
int CompletionsTest::port_ = 0;

const std::string kChatPrompt =
    "<|im_start|>system\nYou are a helpful assistant<|im_end|>\n<|im_start|>user\nCount to three<|im_end|>\n"
    "<|im_start|>assistant\n";
const json kChatMessages = {{{"role", "user"}, {"content", "Count to three"}}};

std::vector<int32_t> tokens_of(const std::string& text) {
  return model()->tokenizer().tokenize(text, true, true);
}

TEST_F(CompletionsTest, ChatLogprobsAreTheLogSoftmaxOfTheLogits) {
  const auto ref = reference(tokens_of(kChatPrompt), 6);
  ASSERT_FALSE(ref.empty());
  const json body = {{"messages", kChatMessages},
                     {"max_tokens", 6},
                     {"temperature", 0},
                     {"logprobs", true},
                     {"top_logprobs", 5}};
  const json j = post_ok("/v1/chat/completions", body);
  const json& content = j["choices"][0]["logprobs"]["content"];
  ASSERT_EQ(content.size(), ref.size()) << j.dump();
  for (size_t i = 0; i < ref.size(); ++i) {
    const json& e = content[i];
    EXPECT_EQ(e["token"], ref[i].piece);
    EXPECT_EQ(e["bytes"], bytes_of(ref[i].piece));
    EXPECT_NEAR(e["logprob"].get<double>(), ref[i].logprobs[static_cast<size_t>(ref[i].token)], 1e-4) << i;
    const auto want = sorted_desc(ref[i].logprobs);
    ASSERT_EQ(e["top_logprobs"].size(), 5u);
    for (size_t k = 0; k < 5; ++k) {
      EXPECT_NEAR(e["top_logprobs"][k]["logprob"].get<double>(), want[k], 1e-4) << i << "," << k;
      if (k > 0) {
        EXPECT_GE(e["top_logprobs"][k - 1]["logprob"].get<double>(),
                  e["top_logprobs"][k]["logprob"].get<double>());
      }
    }
    // Greedy: the chosen token is the most likely one.
    EXPECT_EQ(e["top_logprobs"][0]["token"], e["token"]);
    EXPECT_EQ(e["top_logprobs"][0]["logprob"], e["logprob"]);
  }
  // Streaming chunks carry the entries of their tokens: together the same list.
  json streamed = json::array();
  for (const auto& ev : stream("/v1/chat/completions", body)) {
    if (!ev.is_object() || ev["choices"].empty()) continue;
    const json& lp = ev["choices"][0]["logprobs"];
    if (lp.is_null()) continue;
    for (const auto& e : lp["content"]) streamed.push_back(e);
  }
  ASSERT_EQ(streamed.size(), content.size());
  for (size_t i = 0; i < content.size(); ++i) {
    EXPECT_EQ(streamed[i]["token"], content[i]["token"]);
    EXPECT_NEAR(streamed[i]["logprob"].get<double>(), content[i]["logprob"].get<double>(), 1e-4);
  }
  // Without logprobs the field is null.
  const json plain = post_ok("/v1/chat/completions", {{"messages", kChatMessages}, {"max_tokens", 2}});
  EXPECT_TRUE(plain["choices"][0]["logprobs"].is_null());
}

TEST_F(CompletionsTest, LegacyLogprobsShape) {
  const std::string prompt = "Once upon a time";
  const auto ref = reference(tokens_of(prompt), 8);
  ASSERT_FALSE(ref.empty());
  const json j = post_ok("/v1/completions",
                         {{"prompt", prompt}, {"max_tokens", 8}, {"temperature", 0}, {"logprobs", 3}});
  const json& lp = j["choices"][0]["logprobs"];
  ASSERT_EQ(lp["tokens"].size(), ref.size()) << j.dump();
  std::string joined;
  size_t offset = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    EXPECT_EQ(lp["tokens"][i], ref[i].piece);
    EXPECT_NEAR(lp["token_logprobs"][i].get<double>(), ref[i].logprobs[static_cast<size_t>(ref[i].token)],
                1e-4);
    EXPECT_EQ(lp["text_offset"][i].get<size_t>(), offset);
    offset += ref[i].piece.size();
    joined += ref[i].piece;
    const json& top = lp["top_logprobs"][i];
    EXPECT_GE(top.size(), 1u);
    EXPECT_LE(top.size(), 3u);
    ASSERT_TRUE(top.contains(ref[i].piece)) << top.dump();
    EXPECT_EQ(top[ref[i].piece], lp["token_logprobs"][i]);
  }
  EXPECT_EQ(j["choices"][0]["text"], joined);
  EXPECT_TRUE(j["timings"]["predicted_n"].is_number());
}

TEST_F(CompletionsTest, StopStringCutsTokensFromLogprobs) {
  const std::string prompt = "Once upon a time";
  const auto ref = reference(tokens_of(prompt), 8);
  // Stop at the first character of piece k, one that the text before it lacks: k tokens are
  // reported, the k-th (cut) is not.
  size_t k = 1;
  std::string before = ref.empty() ? "" : ref[0].piece;
  while (k < ref.size() && (ref[k].piece.empty() || before.find(ref[k].piece[0]) != std::string::npos))
    before += ref[k++].piece;
  ASSERT_LT(k, ref.size()) << "no piece starts with a new character";
  const std::string stop = ref[k].piece.substr(0, 1);
  const json j =
      post_ok("/v1/completions",
              {{"prompt", prompt}, {"max_tokens", 8}, {"temperature", 0}, {"logprobs", 0}, {"stop", stop}});
  EXPECT_EQ(j["choices"][0]["text"], before);
  EXPECT_EQ(j["choices"][0]["logprobs"]["tokens"].size(), k) << j.dump();
  // The native route names the stop string.
  const json n = post_ok("/completion",
                         {{"prompt", prompt}, {"n_predict", 8}, {"temperature", 0}, {"stop", {"@@", stop}}});
  EXPECT_EQ(n["content"], before);
  EXPECT_EQ(n["stop_type"], "word");
  EXPECT_EQ(n["stopping_word"], stop);
}

// Choices run concurrently in the slots of a 4-slot server. Logits agree across batch
// compositions and cache layouts to ~1e-5, not bit for bit, and the random fixture's distribution
// over 152k tokens is nearly flat: plain temperature sampling could flip a draw between two calls.
// top_k 5 keeps the draws far from such ties while the seeds still give distinct choices, and
// cache_prompt false makes both calls decode their prompts alike.
TEST(CompletionsChoices, SeveralChoicesWithASeedAreReproducible) {
  OwnServer s(4, 512);
  auto post_ok = [&](const std::string& path, const json& body) { return post_ok_to(s.port, path, body); };
  auto stream = [&](const std::string& path, const json& body) { return stream_from(s.port, path, body); };
  const json body = {{"prompt", "The weather today"}, {"max_tokens", 8}, {"temperature", 1.0}, {"top_k", 5},
                     {"seed", 42}, {"n", 3}, {"cache_prompt", false}};
  const json a = post_ok("/v1/completions", body);
  const json b = post_ok("/v1/completions", body);
  ASSERT_EQ(a["choices"].size(), 3u) << a.dump();
  std::vector<std::string> texts;
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(a["choices"][i]["index"], i);
    EXPECT_EQ(a["choices"][i]["text"], b["choices"][i]["text"]);
    texts.push_back(a["choices"][i]["text"]);
  }
  EXPECT_FALSE(texts[0] == texts[1] && texts[1] == texts[2]) << "distinct seeds gave one text three times";
  EXPECT_EQ(a["usage"]["prompt_tokens"], static_cast<int>(tokens_of("The weather today").size()));
  EXPECT_GE(a["usage"]["completion_tokens"].get<int>(), 3);
  EXPECT_LE(a["usage"]["completion_tokens"].get<int>(), 24);

  // Streaming: every chunk names its choice, one finish chunk per choice, the same texts.
  json sbody = body;
  sbody["stream_options"] = {{"include_usage", true}};
  const auto events = stream("/v1/completions", sbody);
  ASSERT_FALSE(events.empty());
  EXPECT_EQ(events.back(), "[DONE]");
  std::vector<std::string> streamed(3);
  std::vector<int> finishes(3, 0);
  bool usage = false;
  for (const auto& e : events) {
    if (!e.is_object()) continue;
    if (e.contains("usage")) {
      usage = true;
      EXPECT_EQ(e["usage"]["completion_tokens"], a["usage"]["completion_tokens"]);
      continue;
    }
    const json& c = e["choices"][0];
    const size_t i = c["index"];
    ASSERT_LT(i, 3u);
    streamed[i] += c["text"].get<std::string>();
    if (!c["finish_reason"].is_null()) ++finishes[i];
  }
  EXPECT_TRUE(usage);
  EXPECT_EQ(streamed, texts);
  EXPECT_EQ(finishes, std::vector<int>({1, 1, 1}));

  // Chat choices too.
  const json chat = post_ok("/v1/chat/completions",
                            {{"messages", kChatMessages}, {"max_tokens", 4}, {"n", 2}, {"seed", 7}});
  ASSERT_EQ(chat["choices"].size(), 2u);
  EXPECT_EQ(chat["choices"][1]["index"], 1);
  EXPECT_EQ(chat["choices"][1]["message"]["role"], "assistant");
}

TEST_F(CompletionsTest, NativeCompletionMatchesGreedy) {
  const std::string prompt = "The quick brown fox";
  const auto ids = tokens_of(prompt);
  const auto ref = reference(ids, 10);
  std::string greedy;
  for (const auto& s : ref) greedy += s.piece;
  const json j = post_ok(
      "/completion", {{"prompt", prompt}, {"n_predict", 10}, {"temperature", 0}, {"cache_prompt", false}});
  EXPECT_EQ(j["content"], greedy);
  EXPECT_EQ(j["stop"], true);
  EXPECT_EQ(j["stop_type"], ref.size() == 10 ? "limit" : "eos");
  EXPECT_EQ(j["stopping_word"], "");
  EXPECT_EQ(j["tokens_predicted"], static_cast<int>(ref.size()));
  EXPECT_EQ(j["tokens_evaluated"], static_cast<int>(ids.size()));
  EXPECT_EQ(j["tokens_cached"], 0);
  EXPECT_EQ(j["model"], model()->name());
  for (const char* k :
       {"prompt_n", "prompt_ms", "prompt_per_second", "predicted_n", "predicted_ms", "predicted_per_second"})
    EXPECT_TRUE(j["timings"][k].is_number()) << k;
  EXPECT_EQ(j["timings"]["predicted_n"], static_cast<int>(ref.size()));
  EXPECT_EQ(j["timings"]["prompt_n"], static_cast<int>(ids.size()));

  // Streaming: content events, the last with stop: true and the final fields, no [DONE].
  const auto events = stream("/completion", {{"prompt", prompt}, {"n_predict", 10}, {"temperature", 0}});
  ASSERT_GE(events.size(), 2u);
  std::string text;
  for (size_t i = 0; i < events.size(); ++i) {
    ASSERT_TRUE(events[i].is_object()) << events[i].dump();
    text += events[i]["content"].get<std::string>();
    EXPECT_EQ(events[i]["stop"], i + 1 == events.size());
  }
  EXPECT_EQ(text, greedy);
  EXPECT_EQ(events.back()["tokens_predicted"], static_cast<int>(ref.size()));
  EXPECT_GT(events.back()["tokens_cached"].get<int>(), 0);  // the same prompt again: reused

  // The prompt as token ids, and mixed with text, gives the same tokens and text.
  const json by_ids = post_ok(
      "/completion", {{"prompt", ids}, {"n_predict", 10}, {"temperature", 0}, {"return_tokens", true}});
  EXPECT_EQ(by_ids["content"], greedy);
  ASSERT_EQ(by_ids["tokens"].size(), ref.size());
  for (size_t i = 0; i < ref.size(); ++i) EXPECT_EQ(by_ids["tokens"][i], ref[i].token);
  const auto head = tokens_of("The quick");
  json mixed = json::array();
  for (int32_t t : head) mixed.push_back(t);
  mixed.push_back(" brown fox");
  if (std::vector<int32_t>(ids.begin(),
                           ids.begin() + static_cast<ptrdiff_t>(std::min(head.size(), ids.size()))) == head) {
    const auto tail = model()->tokenizer().tokenize(" brown fox", false, true);
    std::vector<int32_t> joined = head;
    joined.insert(joined.end(), tail.begin(), tail.end());
    const json m = post_ok("/completion", {{"prompt", mixed}, {"n_predict", 4}, {"temperature", 0}});
    EXPECT_EQ(m["tokens_evaluated"], static_cast<int>(joined.size()));
  }
}

TEST_F(CompletionsTest, NativeProbabilities) {
  const std::string prompt = "In a small village";
  const auto ref = reference(tokens_of(prompt), 5);
  ASSERT_FALSE(ref.empty());
  const json j =
      post_ok("/completion", {{"prompt", prompt}, {"n_predict", 5}, {"temperature", 0}, {"n_probs", 3}});
  const json& probs = j["completion_probabilities"];
  ASSERT_EQ(probs.size(), ref.size()) << j.dump();
  for (size_t i = 0; i < ref.size(); ++i) {
    EXPECT_EQ(probs[i]["id"], ref[i].token);
    EXPECT_EQ(probs[i]["token"], ref[i].piece);
    EXPECT_NEAR(probs[i]["logprob"].get<double>(), ref[i].logprobs[static_cast<size_t>(ref[i].token)], 1e-4);
    ASSERT_EQ(probs[i]["top_logprobs"].size(), 3u);
    for (const auto& t : probs[i]["top_logprobs"])
      EXPECT_NEAR(t["logprob"].get<double>(), ref[i].logprobs[t["id"].get<size_t>()], 1e-4);
  }
  // n_predict 0 evaluates the prompt only.
  const json none = post_ok("/completion", {{"prompt", prompt}, {"n_predict", 0}});
  EXPECT_EQ(none["content"], "");
  EXPECT_EQ(none["tokens_predicted"], 0);
  EXPECT_EQ(none["stop_type"], "limit");
}

// "name value" and "name{labels} value" lines (and # HELP / # TYPE), into a map keyed by the
// name with its labels (label values may hold spaces).
std::map<std::string, double> parse_metrics(const std::string& text) {
  std::map<std::string, double> out;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("# HELP ", 0) == 0 || line.rfind("# TYPE ", 0) == 0) continue;
    const size_t labels_end = line.find('{') == std::string::npos ? 0 : line.rfind('}') + 1;
    const size_t name_end = line.find(' ', labels_end);
    const std::string name = line.substr(0, name_end);
    std::istringstream ls(name_end == std::string::npos ? std::string() : line.substr(name_end));
    std::string extra;
    double value = NAN;
    ls >> value;
    EXPECT_TRUE(!ls.fail() && !(ls >> extra)) << "bad metrics line: " << line;
    out[name] = value;
  }
  return out;
}

TEST_F(CompletionsTest, MetricsCountTokens) {
  const auto before = parse_metrics(metrics());
  for (const char* name :
       {"llamacpp:prompt_tokens_total", "llamacpp:prompt_seconds_total", "llamacpp:tokens_predicted_total",
        "llamacpp:tokens_predicted_seconds_total", "llamacpp:n_decode_total",
        "llamacpp:n_busy_slots_per_decode", "llamacpp:prompt_tokens_seconds",
        "llamacpp:predicted_tokens_seconds", "llamacpp:kv_cache_usage_ratio", "llamacpp:kv_cache_tokens",
        "llamacpp:requests_processing", "llamacpp:requests_deferred", "kiln:requests_total",
        "kiln:requests_rejected_total"})
    EXPECT_TRUE(before.count(name)) << name;
  const std::string prompt = "A metrics prompt that nobody cached";
  const json j = post_ok("/completion",
                         {{"prompt", prompt}, {"n_predict", 5}, {"temperature", 0}, {"cache_prompt", false}});
  const auto after = parse_metrics(metrics());
  const int n_prompt = static_cast<int>(tokens_of(prompt).size());
  const int n_pred = j["tokens_predicted"];
  EXPECT_EQ(after.at("llamacpp:prompt_tokens_total") - before.at("llamacpp:prompt_tokens_total"), n_prompt);
  EXPECT_EQ(after.at("llamacpp:tokens_predicted_total") - before.at("llamacpp:tokens_predicted_total"),
            n_pred);
  EXPECT_EQ(after.at("kiln:requests_total") - before.at("kiln:requests_total"), 1);
  // One decode for the prompt, then one per generated token but the last (its end needs no decode).
  EXPECT_EQ(after.at("llamacpp:n_decode_total") - before.at("llamacpp:n_decode_total"), n_pred);
  EXPECT_GT(after.at("llamacpp:prompt_seconds_total"), before.at("llamacpp:prompt_seconds_total"));
  EXPECT_GT(after.at("llamacpp:kv_cache_tokens"), 0);
  EXPECT_EQ(after.at("llamacpp:requests_processing"), 0);
  EXPECT_GE(after.at("llamacpp:n_busy_slots_per_decode"), 1);
}

TEST_F(CompletionsTest, FieldErrorsNameTheField) {
  auto check = [](const httplib::Result& r, const std::string& needle) {
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 400) << r->body;
    const json j = json::parse(r->body);
    EXPECT_EQ(j["error"]["code"], 400);
    EXPECT_NE(j["error"]["message"].get<std::string>().find(needle), std::string::npos) << r->body;
  };
  const json chat = {{"messages", kChatMessages}};
  auto with = [](json b, const char* k, json v) {
    b[k] = std::move(v);
    return b;
  };
  check(post("/v1/chat/completions", with(chat, "n", 0)), "'n'");
  check(post("/v1/chat/completions", with(chat, "n", 17)), "'n'");
  check(post("/v1/chat/completions", with(with(chat, "logprobs", true), "top_logprobs", 21)),
        "'top_logprobs'");
  check(post("/v1/chat/completions", with(chat, "top_logprobs", 2)), "'top_logprobs'");
  check(post("/v1/chat/completions", with(chat, "logprobs", 3)), "'logprobs'");
  check(post("/v1/completions", {{"prompt", "x"}, {"logprobs", 6}}), "'logprobs'");
  check(post("/v1/completions", {{"prompt", "x"}, {"logprobs", true}}), "'logprobs'");
  check(post("/completion", {{"prompt", "x"}, {"n_probs", 101}}), "'n_probs'");
  check(post("/completion", {{"prompt", {1, -5}}}), "'prompt'");
  check(post("/completion", {{"prompt", {{1, 2}, {3}}}}), "'prompt'");
  check(post("/completion", {{"n_predict", 3}}), "'prompt'");
  check(post("/completion", {{"prompt", "x"}, {"grammar", 5}}), "'grammar'");
  check(post("/completion", {{"prompt", "x"}, {"mirostat", 2}}), "'mirostat'");
  check(post("/completion", {{"prompt", "x"}, {"logit_bias", {{"x", 1, 2}}}}), "'logit_bias'");
  // llama-server's list form of logit_bias, with false banning a token.
  const int32_t eos = model()->tokenizer().eos();
  auto ok = post("/completion",
                 {{"prompt", "x"}, {"n_predict", 2}, {"logit_bias", {{eos, false}, {"hello", -1.5}}}});
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->status, 200) << ok->body;
}

json endless(const char* prompt) {
  return {{"prompt", prompt},
          {"temperature", 1.0},
          {"seed", 3},
          {"max_tokens", 100000},
          {"logit_bias", {{std::to_string(model()->tokenizer().eos()), -1e9}}}};
}

TEST(CompletionsDisconnect, NonStreamingClientThatLeavesFreesItsSlot) {
  OwnServer s(2, 16384);
  const std::string body = endless("Tell me a long story").dump();
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(s.port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  const std::string request =
      "POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
      "Content-Length: " +
      std::to_string(body.size()) + "\r\n\r\n" + body;
  ASSERT_EQ(write(fd, request.data(), request.size()), static_cast<ssize_t>(request.size()));
  // Wait until it generates, then leave.
  bool busy = false;
  for (int i = 0; i < 400 && !busy; ++i) {
    for (const auto& slot : s.slots()) busy = busy || slot["is_processing"].get<bool>();
    if (!busy) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ASSERT_TRUE(busy);
  std::this_thread::sleep_for(std::chrono::milliseconds(700));
  close(fd);
  const auto closed = std::chrono::steady_clock::now();
  // Another client is served meanwhile.
  httplib::Client c("127.0.0.1", s.port);
  c.set_read_timeout(30);
  auto other =
      c.Post("/v1/completions", json{{"prompt", "Hello"}, {"max_tokens", 3}}.dump(), "application/json");
  ASSERT_TRUE(other);
  EXPECT_EQ(other->status, 200);
  bool idle = false;
  while (!idle && std::chrono::steady_clock::now() - closed < std::chrono::milliseconds(2500)) {
    idle = true;
    for (const auto& slot : s.slots()) idle = idle && !slot["is_processing"].get<bool>();
    if (!idle) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_TRUE(idle) << "the slot still works for a client that left: " << s.slots().dump();
  int max_cached = 0;
  for (const auto& slot : s.slots()) max_cached = std::max(max_cached, slot["n_cached"].get<int>());
  EXPECT_LT(max_cached, 6000);  // stopped long before its 8192-token slot filled
}

// A non-streaming request that waits in the queue for a while is answered when its turn comes,
// as plain JSON with a Content-Length (the server notices a departed client without writing).
TEST(CompletionsDisconnect, QueuedNonStreamingRequestIsAnsweredWhenItsTurnComes) {
  OwnServer s(1, 2048);
  std::atomic<bool> release{false};
  std::thread holder([&] {  // holds the only slot until released, then goes away
    httplib::Client c("127.0.0.1", s.port);
    httplib::Request req;
    req.method = "POST";
    req.path = "/v1/completions";
    json body = endless("Hold the slot");
    body["stream"] = true;
    req.body = body.dump();
    req.set_header("Content-Type", "application/json");
    req.content_receiver = [&](const char*, size_t, uint64_t, uint64_t) { return !release.load(); };
    (void)c.send(req);
  });
  bool busy = false;
  for (int i = 0; i < 400 && !busy; ++i) {
    for (const auto& slot : s.slots()) busy = busy || slot["is_processing"].get<bool>();
    if (!busy) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ASSERT_TRUE(busy);
  std::optional<httplib::Result> r;
  std::thread waiter([&] {
    httplib::Client c("127.0.0.1", s.port);
    c.set_read_timeout(60);
    r = c.Post("/v1/completions", json{{"prompt", "Queued"}, {"max_tokens", 3}, {"temperature", 0}}.dump(),
               "application/json");
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  release = true;
  holder.join();
  waiter.join();
  ASSERT_TRUE(r && *r);
  const auto& res = **r;
  EXPECT_EQ(res.status, 200);
  EXPECT_EQ(res.get_header_value("Content-Length"), std::to_string(res.body.size()));
  const json j = json::parse(res.body);
  EXPECT_EQ(j["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(j["usage"]["completion_tokens"], 3);
}

}  // namespace
}  // namespace kiln::serve
