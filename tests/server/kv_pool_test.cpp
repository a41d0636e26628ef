// One KV pool (-kvu, llama-server's default with -np auto): the slots' layout and flags as
// llama-server resolves them, and a pool that runs out: idle caches are dropped, the latest
// generations are parked in host memory and resumed, and every request completes with the text
// of a run that had room.
#include <gtest/gtest.h>

#include <future>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "in_process_server.h"
#include "serve/server.h"

namespace kiln::serve {
namespace {

using json = nlohmann::json;
using test::post_json;
using test::start_server;

std::shared_ptr<const Model> kjv() {
  static auto m = Model::load(KILN_SOURCE_DIR "/models/kjv-llama-q8_0.gguf");
  EXPECT_TRUE(m.ok()) << (m.ok() ? "" : m.error().message);
  return m.ok() ? *m : nullptr;
}

ServerOptions options(int32_t n_parallel, int64_t n_ctx) {
  ServerOptions o;
  o.n_parallel = n_parallel;
  o.n_threads = 2;
  o.context.n_ctx = n_ctx;
  return o;
}

// `n` prompt tokens of a verse-like text (different for each `seed`).
std::vector<int32_t> prompt_tokens(int seed, size_t n) {
  static const char* const kOpenings[] = {"In the beginning God created",    "And the LORD spake unto Moses",
                                          "Blessed is the man that walketh", "The LORD is my shepherd",
                                          "Now the serpent was more subtil", "And it came to pass",
                                          "Then said Jesus unto them",       "For God so loved the world"};
  std::string text;
  while (text.size() < n * 8)
    text += std::string(kOpenings[seed % 8]) + " and the earth " + std::to_string(seed) + " ";
  auto ids = kjv()->tokenizer().tokenize(text, true, false);
  ids.resize(n);
  return ids;
}

// Eight greedy /completion bodies, a prompt of its own each, that generate n_generated tokens
// (end of text ignored).
std::vector<json> eight_streams(size_t n_prompt, int n_generated) {
  std::vector<json> bodies;
  for (int i = 0; i < 8; ++i)
    bodies.push_back({{"prompt", prompt_tokens(i, n_prompt)},
                      {"n_predict", n_generated},
                      {"temperature", 0},
                      {"ignore_eos", true}});
  return bodies;
}

json props(int port) {
  httplib::Client c("127.0.0.1", port);
  auto r = c.Get("/props");
  EXPECT_TRUE(r && r->status == 200);
  return r ? json::parse(r->body) : json();
}

double metric(int port, const std::string& name) {
  httplib::Client c("127.0.0.1", port);
  auto r = c.Get("/metrics");
  EXPECT_TRUE(r && r->status == 200);
  const size_t at = r ? r->body.find("\n" + name + " ") : std::string::npos;
  EXPECT_NE(at, std::string::npos) << name;
  return at == std::string::npos ? -1 : std::stod(r->body.substr(at + name.size() + 2));
}

// Sends every body at once (a thread each); the answers in order ("" where the status was not 200,
// with a test failure).
std::vector<json> post_all(int port, const std::vector<json>& bodies) {
  std::vector<json> out(bodies.size());
  std::vector<std::thread> threads;
  for (size_t i = 0; i < bodies.size(); ++i)
    threads.emplace_back([&, i] {
      auto r = post_json(port, "/completion", bodies[i]);
      if (r && r->status == 200)
        out[i] = json::parse(r->body);
      else
        ADD_FAILURE() << "request " << i << ": " << (r ? r->body : "no answer");
    });
  for (auto& t : threads) t.join();
  return out;
}

// Streams each body to /completion, sending the next once the one before has its first token
// (so that every prompt is decoded in a step of its own); the texts in order (a test failure for
// an answer that is not 200).
std::vector<std::string> stream_one_after_another(int port, const std::vector<json>& bodies) {
  std::vector<std::string> texts(bodies.size());
  std::vector<std::thread> threads;
  for (size_t i = 0; i < bodies.size(); ++i) {
    std::promise<void> first;
    std::future<void> started = first.get_future();
    threads.emplace_back([&, i, first = std::move(first)]() mutable {
      httplib::Client c("127.0.0.1", port);
      c.set_read_timeout(60);
      httplib::Request req;
      req.method = "POST";
      req.path = "/completion";
      json body = bodies[i];
      body["stream"] = true;
      req.body = body.dump();
      req.set_header("Content-Type", "application/json");
      std::string sse;
      bool signalled = false;
      req.content_receiver = [&](const char* data, size_t n, uint64_t, uint64_t) {
        sse.append(data, n);
        if (!signalled) first.set_value();
        signalled = true;
        return true;
      };
      auto r = c.send(req);
      if (!signalled) first.set_value();
      if (!r || r->status != 200) ADD_FAILURE() << "request " << i << ": " << (r ? r->status : 0);
      for (size_t at = sse.find("data: "); at != std::string::npos; at = sse.find("data: ", at + 1)) {
        const json event = json::parse(sse.substr(at + 6, sse.find('\n', at) - at - 6), nullptr, false);
        if (event.is_object()) texts[i] += event.value("content", "");
      }
    });
    started.wait();
  }
  for (auto& t : threads) t.join();
  return texts;
}

// `kiln serve -c 4096` without -np: 4 slots, each of which may use the whole pool, so one
// 3,500-token prompt and three short ones are served at once.
TEST(KvPool, AutoParallelIsFourSlotsOverOnePool) {
  int port = 0;
  auto server = start_server(options(ServerOptions::kParallelAuto, 4096), kjv(), &port);
  ASSERT_TRUE(server);
  const json p = props(port);
  EXPECT_EQ(p["total_slots"], 4);
  EXPECT_EQ(p["n_ctx"], 4096);
  EXPECT_EQ(p["default_generation_settings"]["n_ctx"], 4096);
  auto body = [](int seed, size_t n) {
    return json{
        {"prompt", prompt_tokens(seed, n)}, {"n_predict", 4}, {"temperature", 0}, {"ignore_eos", true}};
  };
  std::vector<json> bodies = {body(0, 3500)};
  for (int i = 1; i <= 3; ++i) bodies.push_back(body(i, 20));
  const auto got = post_all(port, bodies);
  EXPECT_EQ(got[0].value("tokens_evaluated", 0), 3500);
  for (const json& g : got) EXPECT_EQ(g.value("tokens_predicted", 0), 4) << g.dump();
  server->stop();
}

// An explicit -np splits the context (llama-server's -no-kvu default then) unless -kvu;
// --kv-unified-per-slot caps a slot and, without -c, sizes the pool.
TEST(KvPool, ExplicitParallelSplitsUnlessUnified) {
  const json long_prompt = {{"prompt", prompt_tokens(1, 1200)}, {"n_predict", 2}};
  {
    int port = 0;
    auto server = start_server(options(4, 4096), kjv(), &port);
    ASSERT_TRUE(server);
    EXPECT_EQ(props(port)["default_generation_settings"]["n_ctx"], 1024);
    auto r = post_json(port, "/completion", long_prompt);
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 400);
    EXPECT_NE(r->body.find("more than a slot's context of 1024"), std::string::npos) << r->body;
    server->stop();
  }
  {
    ServerOptions o = options(4, 4096);
    o.kv_unified = true;
    int port = 0;
    auto server = start_server(o, kjv(), &port);
    ASSERT_TRUE(server);
    EXPECT_EQ(props(port)["default_generation_settings"]["n_ctx"], 4096);
    auto r = post_json(port, "/completion", long_prompt);
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 200) << r->body;
    server->stop();
  }
  {
    ServerOptions o = options(ServerOptions::kParallelAuto, 0);
    o.kv_unified_per_slot = 512;
    int port = 0;
    auto server = start_server(o, kjv(), &port);
    ASSERT_TRUE(server);
    const json p = props(port);
    EXPECT_EQ(p["n_ctx"], 2048);
    EXPECT_EQ(p["default_generation_settings"]["n_ctx"], 512);
    server->stop();
  }
}

// Eight streams whose contexts add up to twice the pool (48 prompt tokens and 208 generated each
// in 1,024 cells), arriving one after another: all complete, the latest ones parked until the
// earlier ones end, and each gives exactly the text it gives in a pool with room for all. Exactly,
// because no step of a stream depends on what else runs or on where its cells lie (see the
// engine's header). With or without speculation.
TEST(KvPool, OverflowParksTheLatestAndResumesThemExactly) {
  const std::vector<json> bodies = eight_streams(48, 208);
  struct Run {
    std::vector<std::string> texts;
    double parked = -1, cleared = -1;
  };
  auto run = [&](int64_t n_ctx, bool speculative) {
    ServerOptions o = options(8, n_ctx);
    o.kv_unified = true;
    if (speculative) o.speculative.sources = {DraftSource::NgramSimple};
    int port = 0;
    Run out;
    auto server = start_server(o, kjv(), &port);
    if (!server) return out;
    out.texts = stream_one_after_another(port, bodies);
    out.parked = metric(port, "kiln:generations_parked_total");
    out.cleared = metric(port, "kiln:idle_caches_cleared_total");
    server->stop();
    return out;
  };
  for (bool speculative : {false, true}) {
    const Run roomy = run(4096, speculative);
    EXPECT_EQ(roomy.parked, 0);
    const Run tight = run(1024, speculative);
    EXPECT_GT(tight.parked, 0);
    EXPECT_GT(tight.cleared, 0);  // the ended streams' caches made room for the parked ones
    ASSERT_EQ(tight.texts.size(), roomy.texts.size());
    for (size_t i = 0; i < tight.texts.size(); ++i) {
      EXPECT_FALSE(roomy.texts[i].empty()) << "stream " << i;
      EXPECT_EQ(tight.texts[i], roomy.texts[i]) << "stream " << i << (speculative ? ", speculative" : "");
    }
  }
}

// The case: eight 450-token prompts sent at once to a pool of half their contexts (-c 2048
// -np 8 -kvu). Every stream completes with the text and the log-probabilities (every bit: the
// small model's text alone would hide a last-bit difference) it gives in a pool with room for all,
// and that the request gives alone: prompts of 64 tokens and more take the tiled attention, whose
// tiles stay the same because each sequence's keys keep their offsets in blocks of their own, and
// each prompt chunk is decoded alone, cut as the request alone cuts it.
TEST(KvPool, LongPromptsSentAtOnceGiveTheTextsOfARoomyRun) {
  constexpr int kPrompt = 450, kGenerated = 62;
  std::vector<json> bodies = eight_streams(kPrompt, kGenerated);
  for (json& b : bodies) b["n_probs"] = 2;
  auto run = [&](int64_t n_ctx, const std::vector<json>& requests, double* parked) {
    ServerOptions o = options(8, n_ctx);
    o.kv_unified = true;
    int port = 0;
    std::vector<std::string> texts;
    auto server = start_server(o, kjv(), &port);
    if (!server) return texts;
    for (const json& answer : post_all(port, requests))
      texts.push_back(answer.value("content", "") + answer.value("completion_probabilities", json()).dump());
    if (parked) *parked = metric(port, "kiln:generations_parked_total");
    server->stop();
    return texts;
  };
  double roomy_parked = -1, tight_parked = -1;
  const auto roomy = run(8 * (kPrompt + kGenerated), bodies, &roomy_parked);
  const auto tight = run(2048, bodies, &tight_parked);
  const auto alone = run(2048, {bodies[5]}, nullptr);
  EXPECT_EQ(roomy_parked, 0);
  EXPECT_GT(tight_parked, 0);
  ASSERT_EQ(roomy.size(), bodies.size());
  ASSERT_EQ(tight.size(), bodies.size());
  for (size_t i = 0; i < bodies.size(); ++i) {
    EXPECT_FALSE(roomy[i].empty()) << "stream " << i;
    EXPECT_EQ(tight[i], roomy[i]) << "stream " << i;
  }
  ASSERT_EQ(alone.size(), 1u);
  EXPECT_EQ(alone[0], roomy[5]);
}

}  // namespace
}  // namespace kiln::serve
