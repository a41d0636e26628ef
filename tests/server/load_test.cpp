// Load: 32 concurrent streaming clients against `kiln serve --parallel 4 --queue 16` (a child
// process) for 60 s, with varied prompts, lengths and routes; some cancel midway. Every request must
// end with a complete stream (finish_reason, then [DONE]) or a 503 in OpenAI's error shape; the
// server must survive, free every slot, and not grow: its RSS after the run stays within
// kRssMarginPercent + kRssMarginKib of its RSS after a short warm-up with the same clients.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <mutex>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "http_client.h"
#include "serve_process.h"
#include "test_data.h"

namespace {

using nlohmann::json;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

// The issue asks for 60 s of load; CI runs it once. It is the one long test of test_server.
constexpr auto kLoadDuration = 60s;
constexpr auto kWarmupDuration = 5s;
constexpr int kClients = 32;
// Memory must stay flat: RSS after the run <= RSS after the warm-up * (1 + 10%) + 8 MiB. The
// server runs with MALLOC_ARENA_MAX=2: with glibc's default (8 arenas a core, one per busy HTTP
// thread) freed request memory stays cached in the arenas, and RSS after a minute of load was
// +20% over the warm-up (137 -> 164 MiB) although nothing leaked; with 2 arenas it was +2%.
constexpr int64_t kRssMarginPercent = 10;
constexpr int64_t kRssMarginKib = 8 * 1024;

const std::string kModel = kiln::test_data::path("models/qwen2-e64-Q8_0.gguf");

const char* const kPrompts[] = {
    "Once upon a time",
    "The capital of France is",
    "List three colours:",
    "def fibonacci(n):",
    "Écris une phrase en français.",
    "日本の首都は",
    "A long time ago, in a galaxy far, far away, there lived a small robot who wanted to learn to sing.",
    "1, 2, 3, 4,",
};

struct Tally {
  std::atomic<int> requests{0}, completed{0}, cancelled{0}, refused{0}, cut{0}, tokens{0};
  std::mutex mutex;
  std::vector<std::string> failures;  // the first few, with what was received
  std::atomic<int> n_failures{0};
  void fail(std::string what) {
    if (n_failures++ >= 8) return;
    std::lock_guard lock(mutex);
    failures.push_back(std::move(what));
  }
};

// Checks a complete SSE answer: JSON chunks of `object`, exactly one finish_reason ("stop" or
// "length") in the last choice chunk, the usage chunk after it when asked, then "data: [DONE]".
// The empty string when it is right, else what is wrong. *n_pieces counts content chunks.
std::string check_stream(const std::string& body, bool chat, bool usage, int max_tokens, int* n_pieces) {
  std::vector<std::string> events;
  for (size_t at = 0; at < body.size();) {
    const size_t end = body.find("\n\n", at);
    if (end == std::string::npos) return "an event without its blank line at byte " + std::to_string(at);
    events.push_back(body.substr(at, end - at));
    at = end + 2;
  }
  if (events.empty() || events.back() != "data: [DONE]") return "the stream does not end with data: [DONE]";
  events.pop_back();
  bool finished = false, got_usage = false;
  *n_pieces = 0;
  for (const std::string& e : events) {
    if (e.rfind("data: ", 0) != 0) return "an event that is not data: " + e;
    const json j = json::parse(e.substr(6), nullptr, false);
    if (!j.is_object()) return "a chunk that is not a JSON object: " + e;
    if (j.contains("error")) return "an error chunk: " + e;
    if (j.value("object", "") != (chat ? "chat.completion.chunk" : "text_completion"))
      return "wrong object: " + e;
    if (got_usage) return "a chunk after the usage chunk: " + e;
    const json choices = j.value("choices", json());
    if (const json u = j.value("usage", json()); u.is_object()) {
      if (!finished || choices != json::array()) return "a usage chunk before the end or with choices: " + e;
      const int n = u.value("completion_tokens", -1);
      if (n < 1 || n > max_tokens)
        return "usage.completion_tokens out of 1.." + std::to_string(max_tokens) + ": " + e;
      got_usage = true;
      continue;
    }
    if (!choices.is_array() || choices.size() != 1 || !choices[0].is_object()) return "not one choice: " + e;
    const json& c = choices[0];
    if (finished) return "a choice after the finish_reason: " + e;
    if (const json reason = c.value("finish_reason", json()); !reason.is_null()) {
      if (reason != "stop" && reason != "length") return "finish_reason " + reason.dump();
      finished = true;
    }
    const json text =
        chat ? c.value("delta", json::object()).value("content", json()) : c.value("text", json());
    if (text.is_string() && !text.get<std::string>().empty()) ++*n_pieces;
  }
  if (!finished) return "no finish_reason";
  if (usage && !got_usage) return "no usage chunk";
  return {};
}

// One client: requests in a loop until `until`, each streamed; a quarter of them cancel after a
// few events. At `until` the request in flight is cut (the receiver stops, or run_clients stops
// `c` while the request waits for its first token): the server sees a disconnect.
void client_loop(httplib::Client& c, int index, Clock::time_point until, Tally& tally) {
  std::mt19937 rng(static_cast<uint32_t>(1000 + index));
  for (int iter = 0; Clock::now() < until; ++iter) {
    const bool chat = rng() % 2 == 0;
    const bool usage = rng() % 2 == 0;
    const int max_tokens = 1 + static_cast<int>(rng() % 32);
    const int cancel_after = rng() % 4 == 0 ? 1 + static_cast<int>(rng() % 4) : -1;  // events
    const std::string prompt = std::string(kPrompts[rng() % std::size(kPrompts)]) + " #" +
                               std::to_string(index) + "." + std::to_string(iter);
    json body = {{"max_tokens", max_tokens}, {"stream", true}, {"temperature", 0.8}, {"seed", iter}};
    if (chat)
      body["messages"] = json::array({{{"role", "user"}, {"content", prompt}}});
    else
      body["prompt"] = prompt;
    if (usage) body["stream_options"] = {{"include_usage", true}};

    httplib::Request req;
    req.method = "POST";
    req.path = chat ? "/v1/chat/completions" : "/v1/completions";
    req.body = body.dump();
    req.set_header("Content-Type", "application/json");
    std::string received;
    bool cancelled = false;
    req.content_receiver = [&](const char* data, size_t n, uint64_t, uint64_t) {
      received.append(data, n);
      if (Clock::now() >= until && received.find("[DONE]") == std::string::npos) return false;
      if (cancel_after < 0) return true;
      int events = 0;
      for (size_t at = received.find("\n\n"); at != std::string::npos; at = received.find("\n\n", at + 2))
        ++events;
      cancelled = events >= cancel_after && received.find("[DONE]") == std::string::npos;
      return !cancelled;
    };
    ++tally.requests;
    const auto t0 = Clock::now();
    auto r = c.send(req);
    const std::string what = std::string(req.path) + " " + req.body + " -> after " +
                             std::to_string(std::chrono::duration<double>(Clock::now() - t0).count()) +
                             " s: ";
    if (cancelled && r.error() == httplib::Error::Canceled) {
      ++tally.cancelled;
      continue;
    }
    if (!r && Clock::now() >= until) {
      ++tally.cut;
      continue;
    }
    if (!r) {
      tally.fail(what + "transport error " + httplib::to_string(r.error()) + " after: " + received);
      continue;
    }
    if (r->status == 503) {
      std::string message;
      if (!kiln::test::is_openai_error(received, &message))
        tally.fail(what + "503 not in OpenAI's shape: " + received);
      ++tally.refused;
      std::this_thread::sleep_for(std::chrono::milliseconds(100 + rng() % 400));  // a polite client backs off
      continue;
    }
    if (r->status != 200) {
      tally.fail(what + std::to_string(r->status) + ": " + received);
      continue;
    }
    int pieces = 0;
    std::string e;
    try {
      e = check_stream(received, chat, usage, max_tokens, &pieces);
    } catch (const json::exception& x) {  // a field of the wrong type
      e = x.what();
    }
    if (!e.empty()) {
      tally.fail(what + e + "\n" + received);
      continue;
    }
    ++tally.completed;
    tally.tokens += pieces;
  }
}

// Runs the clients for `duration`; *rss_kib gets the server's RSS every 5 s meanwhile.
void run_clients(kiln::test::ServeProcess& server, std::chrono::seconds duration, Tally& tally,
                 std::vector<int64_t>* rss_kib) {
  const auto until = Clock::now() + duration;
  std::vector<std::unique_ptr<httplib::Client>> connections;
  std::vector<std::thread> clients;
  std::atomic<int> running{kClients};
  for (int i = 0; i < kClients; ++i) {
    connections.push_back(std::make_unique<httplib::Client>("127.0.0.1", server.port()));
    httplib::Client* connection = connections.back().get();  // the vector may move its elements
    connection->set_read_timeout(120);
    connection->set_connection_timeout(30);
    clients.emplace_back([&, connection, i] {
      client_loop(*connection, i, until, tally);
      --running;
    });
  }
  for (auto next = Clock::now() + 5s; next < until; next += 5s) {
    std::this_thread::sleep_until(next);
    rss_kib->push_back(server.rss_kib());
  }
  std::this_thread::sleep_until(until);
  while (running > 0) {  // requests still waiting for their first token end now
    for (auto& c : connections) c->stop();
    std::this_thread::sleep_for(50ms);
  }
  for (auto& t : clients) t.join();
}

TEST(ServerLoad, ThirtyTwoStreamingClients) {
  std::string error;
  auto server = kiln::test::ServeProcess::start(
      {"-m", kModel, "-c", "2048", "-t", "2", "--parallel", "4", "--queue", "16"}, &error,
      {"MALLOC_ARENA_MAX=2"});
  ASSERT_NE(server, nullptr) << error;
  const int port = server->port();

  Tally warmup;
  std::vector<int64_t> rss_samples;
  run_clients(*server, kWarmupDuration, warmup, &rss_samples);
  for (const auto& f : warmup.failures) ADD_FAILURE() << "warm-up: " << f.substr(0, 2000);
  EXPECT_EQ(warmup.n_failures.load(), 0) << server->log();
  json slots;
  ASSERT_TRUE(kiln::test::wait_slots_idle(port, 5s, &slots)) << "after the warm-up: " << slots.dump();
  const int64_t rss_warm = server->rss_kib();
  ASSERT_GT(rss_warm, 0);

  const auto t0 = Clock::now();
  Tally tally;
  rss_samples.clear();
  run_clients(*server, kLoadDuration, tally, &rss_samples);
  const double elapsed = std::chrono::duration<double>(Clock::now() - t0).count();

  ASSERT_TRUE(server->alive()) << "the server died under load:\n" << server->log();
  const auto t_idle = Clock::now();
  const bool idle = kiln::test::wait_slots_idle(port, 5s, &slots);
  const double idle_s = std::chrono::duration<double>(Clock::now() - t_idle).count();
  EXPECT_TRUE(idle) << "slots still busy 5 s after the load: " << slots.dump();
  // RSS must come back: the connections the load cut close and free their buffers asynchronously,
  // so it is sampled for up to 3 s, until it is within the bound.
  const int64_t rss_bound = rss_warm + rss_warm * kRssMarginPercent / 100 + kRssMarginKib;
  int64_t rss_end = 0;
  for (int i = 0; i < 15 && (i == 0 || rss_end > rss_bound); ++i) {
    std::this_thread::sleep_for(200ms);
    rss_end = server->rss_kib();
  }

  std::printf(
      "load: %d clients, %.1f s: %d requests: %d complete, %d cancelled by the client, %d refused (503), "
      "%d cut at the end; %d content chunks (%.1f/s); slots idle %.2f s after; RSS warm-up %lld KiB, "
      "after %lld KiB (%+.1f%%)\n",
      kClients, elapsed, tally.requests.load(), tally.completed.load(), tally.cancelled.load(),
      tally.refused.load(), tally.cut.load(), tally.tokens.load(), tally.tokens.load() / elapsed, idle_s,
      static_cast<long long>(rss_warm), static_cast<long long>(rss_end),
      100.0 * static_cast<double>(rss_end - rss_warm) / static_cast<double>(rss_warm));
  std::printf("load: RSS every 5 s under load (KiB):");
  for (int64_t kib : rss_samples) std::printf(" %lld", static_cast<long long>(kib));
  std::printf("\n");
  for (const auto& f : tally.failures) ADD_FAILURE() << f.substr(0, 2000);
  EXPECT_EQ(tally.n_failures.load(), 0) << "the server's log:\n" << server->log();
  EXPECT_GT(tally.completed.load(), 0);
  EXPECT_GT(tally.cancelled.load(), 0);
  EXPECT_LE(rss_end, rss_bound) << "RSS grew from " << rss_warm << " KiB to " << rss_end << " KiB";

  // Still serving normally.
  httplib::Client c("127.0.0.1", port);
  c.set_read_timeout(30);
  auto r = c.Post("/v1/completions", json{{"prompt", "Hello"}, {"max_tokens", 4}}.dump(), "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200) << r->body;
  EXPECT_EQ(server->terminate(30s), 0) << "no clean exit on SIGTERM:\n" << server->log();
}

}  // namespace
