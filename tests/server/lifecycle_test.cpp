// The server's lifecycle: idle sleep (the model's memory evicted, its state kept: the next request
// restores it and a returning conversation reuses its prompt cache, with the same output as a
// server that never slept), waking under concurrent requests, /health, /props, /metrics and
// /v1/memory while asleep, POST /apply-template against the template fixtures, and `kiln serve
// --sleep-idle-seconds` as a child process (RSS drop, graceful exit).
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <optional>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "http_client.h"
#include "serve/server.h"
#include "serve/server_state.h"
#include "serve_process.h"
#include "temp_dir.h"
#include "test_data.h"
#include "time_scale.h"

namespace kiln::serve {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

const std::string kQwen2 = kiln::test_data::path("models/qwen2-e64-Q8_0.gguf");
// The project's trained model: clear greedy margins, so concurrent slots give the same text as
// one alone (see server_test.cpp).
const char* kKjv = KILN_SOURCE_DIR "/models/kjv-llama-q8_0.gguf";

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Whether `pred` holds within `seconds` (scaled for slow builds), polling every 20 ms.
bool wait_for(const std::function<bool()>& pred, double seconds) {
  const auto end = Clock::now() + test::scaled(std::chrono::duration<double>(seconds));
  while (Clock::now() < end) {
    if (pred()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return pred();
}

httplib::Result post(int port, const std::string& path, const json& body) {
  httplib::Client c("127.0.0.1", port);
  c.set_read_timeout(60);
  return c.Post(path.c_str(), body.dump(), "application/json");
}

httplib::Result get(int port, const std::string& path) {
  httplib::Client c("127.0.0.1", port);
  c.set_read_timeout(60);
  return c.Get(path.c_str());
}

// The text of a greedy completion; empty (and a failed expectation) on an error.
std::string greedy(int port, const std::string& prompt, int n = 8) {
  auto r = post(port, "/v1/completions", {{"prompt", prompt}, {"max_tokens", n}, {"temperature", 0}});
  EXPECT_TRUE(r);
  if (!r) return "";
  EXPECT_EQ(r->status, 200) << r->body;
  if (r->status != 200) return "";
  return json::parse(r->body)["choices"][0]["text"].get<std::string>();
}

bool props_sleeping(int port) {
  auto r = get(port, "/props");
  return r && r->status == 200 && json::parse(r->body)["is_sleeping"].get<bool>();
}

ServerOptions sleepy_options() {
  ServerOptions o;
  o.n_parallel = 4;
  o.queue_limit = 8;
  o.n_threads = 1;
  o.context.n_ctx = 256;
  o.sleep_idle_seconds = test::scaled_seconds(1);
  return o;
}

// A greedy completion's text and its prompt counts.
struct Turn {
  std::string text;
  int prompt_n = -1;       // prompt tokens decoded (the cached ones not)
  int prompt_tokens = -1;  // the whole prompt
};

Turn turn(int port, const std::string& prompt) {
  auto r = post(port, "/v1/completions", {{"prompt", prompt}, {"max_tokens", 8}, {"temperature", 0}});
  EXPECT_TRUE(r);
  if (!r) return {};
  EXPECT_EQ(r->status, 200) << r->body;
  if (r->status != 200) return {};
  const json j = json::parse(r->body);
  return {j["choices"][0]["text"], j["timings"]["prompt_n"], j["usage"]["prompt_tokens"]};
}

// The row of owner `model` (a model's name, or the device's arena: "compute (sim0)") of
// GET /v1/memory on `device`.
json memory_of(int port, const std::string& device, const std::string& model) {
  auto r = get(port, "/v1/memory");
  EXPECT_TRUE(r && r->status == 200);
  if (!r || r->status != 200) return {};
  const json body = json::parse(r->body);  // a temporary's ["devices"] would dangle in the loop
  for (const json& d : body["devices"]) {
    if (d["device"] != device) continue;
    for (const json& o : d["owners"])
      if (o["name"] == model) return o;
  }
  ADD_FAILURE() << "no owner '" << model << "' on " << device << ": " << r->body;
  return {};
}

class IdleSleep : public ::testing::TestWithParam<const char*> {};

// Sleep evicts the model's memory and keeps its state: a returning conversation decodes only its
// new tokens after the wake, and every answer equals a server's that never slept (on the CPU, where
// the KV cache stays in RAM, and on sim0, where it goes to the host and back).
TEST_P(IdleSleep, EvictsTheModelAndARepeatTurnReusesItsPromptCache) {
  // cpu_swap: the CPU with --swap-dir, where the KV cache goes to a file while asleep.
  const bool swap = std::string(GetParam()) == "cpu_swap";
  const std::string device = swap ? "cpu" : GetParam();
  std::optional<test::TempDir> swap_dir;
  ServerOptions o = sleepy_options();
  o.device = device;
  if (swap) o.swap_dir = swap_dir.emplace("kiln-swap").path();
  o.context.n_ubatch = 64;  // a small compute arena (64 rows of 151,936 logits)
  o.sim_devices = {{.name = "sim0", .capacity = size_t{512} << 20}};
  ServerOptions awake_o = o;
  awake_o.sleep_idle_seconds = 0;
  auto model = Model::load(kQwen2);
  ASSERT_TRUE(model.ok());
  Server s(o), awake(awake_o);
  auto port = s.listen("127.0.0.1", 0);
  auto awake_port = awake.listen("127.0.0.1", 0);
  ASSERT_TRUE(port.ok() && awake_port.ok());
  ASSERT_TRUE(s.attach(*model).ok());
  ASSERT_TRUE(awake.attach(*model).ok());
  const std::string name = s.info()->name;

  std::string conversation = "The quick brown fox";
  const Turn first = turn(*port, conversation);
  const auto answered = Clock::now();
  ASSERT_FALSE(first.text.empty());
  EXPECT_EQ(first.text, turn(*awake_port, conversation).text);
  EXPECT_FALSE(props_sleeping(*port)) << "asleep right after a request";
  const json resident = memory_of(*port, device, name);
  EXPECT_GT(resident["weights"].get<int64_t>(), 0);
  EXPECT_EQ(resident["evicted_residents"], 0);
  // The device's compute arena, an owner of its own: 64 rows of 151,936 logits.
  const std::string arena = "compute (" + device + ")";
  EXPECT_GT(memory_of(*port, device, arena)["compute"].get<size_t>(), size_t{64 * 151936 * 4});

  ASSERT_TRUE(wait_for([&] { return s.sleeping(); }, 10));
  EXPECT_GE(std::chrono::duration<double>(Clock::now() - answered).count(), o.sleep_idle_seconds - 0.1)
      << "slept before " << o.sleep_idle_seconds << " s of idleness";
  // sleeping() turns true as the eviction starts; the device's arena goes last.
  wait_for([&] { return memory_of(*port, device, arena)["compute"] == 0; }, 5);
  const json asleep = memory_of(*port, device, name);
  EXPECT_EQ(asleep["weights"], 0) << asleep;
  EXPECT_EQ(asleep["compute"], 0) << asleep;
  EXPECT_EQ(memory_of(*port, device, arena)["compute"], 0) << "sleep kept the device's compute arena";
  EXPECT_GT(asleep["evicted_residents"].get<int>(), 0) << asleep;
  if (device != "cpu" || swap) {
    EXPECT_EQ(asleep["kv"], 0) << "the KV cache stayed on " << device;
  } else {
    EXPECT_EQ(asleep["kv"], resident["kv"]) << "the KV cache on the CPU is counted while asleep";
  }
  if (swap) {
    EXPECT_EQ(test::open_files_in(swap_dir->path()), 1) << "one swap file for the one KV cache";
    EXPECT_TRUE(fs::is_empty(swap_dir->path())) << "the swap file has a name";
  }

  // Health, properties, metrics and slots answer without waking it.
  for (const char* path : {"/health", "/v1/health"}) {
    auto h = get(*port, path);
    ASSERT_TRUE(h);
    EXPECT_EQ(h->status, 200);
    EXPECT_EQ(json::parse(h->body), json({{"status", "ok"}, {"sleeping", true}}));
  }
  auto props = get(*port, "/props");
  ASSERT_TRUE(props);
  ASSERT_EQ(props->status, 200);
  const json p = json::parse(props->body);
  EXPECT_EQ(p["is_sleeping"], true);
  EXPECT_EQ(p["total_slots"], 4);
  EXPECT_EQ(p["n_ctx"], 256);
  EXPECT_EQ(p["default_generation_settings"]["n_ctx"], 64);
  EXPECT_EQ(p["eos_token"], "<|endoftext|>");
  EXPECT_NE(p["chat_template"].get<std::string>().find("<|im_start|>"), std::string::npos);
  auto metrics = get(*port, "/metrics");
  ASSERT_TRUE(metrics);
  EXPECT_EQ(metrics->status, 200) << metrics->body;
  EXPECT_NE(metrics->body.find("llamacpp:prompt_tokens_total"), std::string::npos);
  auto slots = get(*port, "/slots");
  ASSERT_TRUE(slots);
  ASSERT_EQ(slots->status, 200);
  int64_t cached = 0;
  for (const json& slot : json::parse(slots->body)) cached += slot["n_cached"].get<int64_t>();
  EXPECT_GT(cached, 0) << "the slots forgot their tokens while asleep";
  EXPECT_TRUE(s.sleeping());

  // The conversation returns: its prompt cache is used, and the answer is the never-slept one.
  conversation += first.text + " and then";
  const Turn second = turn(*port, conversation);
  const Turn want = turn(*awake_port, conversation);
  EXPECT_EQ(second.text, want.text);
  EXPECT_EQ(second.prompt_n, want.prompt_n);
  EXPECT_LT(second.prompt_n, second.prompt_tokens - first.prompt_tokens + 1)
      << "the returning conversation prefilled again";
  EXPECT_FALSE(s.sleeping());
  EXPECT_EQ(memory_of(*port, device, name)["evicted_residents"], 0);
  EXPECT_GT(memory_of(*port, device, arena)["compute"].get<size_t>(), 0u);
  if (swap) {
    EXPECT_EQ(test::open_files_in(swap_dir->path()), 0) << "the swap file outlived the wake";
  }
  auto h = get(*port, "/health");
  ASSERT_TRUE(h);
  EXPECT_EQ(json::parse(h->body), json({{"status", "ok"}}));
  s.stop();
  awake.stop();
}

INSTANTIATE_TEST_SUITE_P(Devices, IdleSleep, ::testing::Values("cpu", "sim0", "cpu_swap"),
                         [](const auto& info) { return std::string(info.param); });

// Requests that arrive together at a sleeping server all get the same answers as before it slept.
TEST(IdleSleepWake, ConcurrentRequestsAllWakeIt) {
  auto model = Model::load(kKjv);
  ASSERT_TRUE(model.ok());
  Server s(sleepy_options());
  auto port = s.listen("127.0.0.1", 0);
  ASSERT_TRUE(port.ok());
  ASSERT_TRUE(s.attach(*model).ok());
  const std::string prompt = "And God said";
  const std::string expect = greedy(*port, prompt);
  ASSERT_FALSE(expect.empty());
  ASSERT_TRUE(wait_for([&] { return s.sleeping(); }, 10));

  constexpr int kClients = 6;
  std::vector<std::string> texts(kClients);
  std::vector<int> statuses(kClients, 0);
  std::vector<std::thread> clients;
  for (int i = 0; i < kClients; ++i) {
    clients.emplace_back([&, i] {
      if (i % 3 == 2) {  // a route that needs only the tokenizer wakes it too
        auto r = post(*port, "/tokenize", {{"content", prompt}});
        statuses[i] = r ? r->status : -1;
        texts[i] = expect;
        return;
      }
      auto r = post(*port, "/v1/completions", {{"prompt", prompt}, {"max_tokens", 8}, {"temperature", 0}});
      statuses[i] = r ? r->status : -1;
      if (r && r->status == 200) texts[i] = json::parse(r->body)["choices"][0]["text"];
    });
  }
  for (auto& t : clients) t.join();
  for (int i = 0; i < kClients; ++i) {
    EXPECT_EQ(statuses[i], 200) << "client " << i;
    EXPECT_EQ(texts[i], expect) << "client " << i;
  }
  EXPECT_FALSE(s.sleeping());
  s.stop();
}

TEST(IdleSleepWake, SleepingServerStopsAtOnce) {
  auto model = Model::load(kKjv);
  ASSERT_TRUE(model.ok());
  Server s(sleepy_options());
  auto port = s.listen("127.0.0.1", 0);
  ASSERT_TRUE(port.ok());
  ASSERT_TRUE(s.attach(*model).ok());
  ASSERT_TRUE(wait_for([&] { return s.sleeping(); }, 10));
  const auto t0 = Clock::now();
  s.stop();
  EXPECT_LT(std::chrono::duration<double>(Clock::now() - t0).count(), 1.0);
}

// POST /apply-template renders as the template fixtures' reference Jinja does. Templates that
// use bos_token / eos_token / strftime_now are left out: the server renders with the model's own
// BOS/EOS texts and the real clock, the fixtures with "<s>", "</s>" and a fixed one.
TEST(ApplyTemplate, MatchesFixtureRenderings) {
  auto m = Model::load(kQwen2);
  ASSERT_TRUE(m.ok());
  int checked = 0;
  for (const auto& entry : fs::directory_iterator(kiln::test_data::path("templates"))) {
    if (entry.path().extension() != ".jinja") continue;
    const std::string source = read_text(entry.path().string());
    if (source.find("bos_token") != std::string::npos || source.find("eos_token") != std::string::npos ||
        source.find("strftime_now") != std::string::npos)
      continue;
    fs::path expected_path = entry.path();
    expected_path.replace_extension(".expected.json");
    const json expected = json::parse(read_text(expected_path.string()));
    ServerOptions o;
    o.n_parallel = 1;
    o.queue_limit = 1;
    o.n_threads = 1;
    o.context.n_ctx = 64;
    o.chat_template_source = source;
    Server s(o);
    auto port = s.listen("127.0.0.1", 0);
    ASSERT_TRUE(port.ok());
    ASSERT_TRUE(s.attach(*m).ok()) << entry.path();
    for (const auto& [name, messages] : expected["conversations"].items()) {
      auto r = post(*port, "/apply-template", {{"messages", messages}});
      ASSERT_TRUE(r);
      ASSERT_EQ(r->status, 200) << entry.path() << " " << name << ": " << r->body;
      EXPECT_EQ(json::parse(r->body)["prompt"], expected["renders"][name + "+gen"])
          << entry.path() << " " << name;
      ++checked;
    }
    s.stop();
  }
  EXPECT_GE(checked, 15);  // at least 5 templates x 3 conversations
}

TEST(ApplyTemplate, ModelTemplateAndBadRequests) {
  auto m = Model::load(kQwen2);
  ASSERT_TRUE(m.ok());
  ServerOptions o;
  o.n_parallel = 1;
  o.queue_limit = 1;
  o.n_threads = 1;
  o.context.n_ctx = 64;
  Server s(o);
  auto port = s.listen("127.0.0.1", 0);
  ASSERT_TRUE(port.ok());
  ASSERT_TRUE(s.attach(*m).ok());
  // The qwen2 fixture's own template adds a system turn when there is none.
  auto r = post(*port, "/apply-template", {{"messages", {{{"role", "user"}, {"content", "Hi"}}}}});
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  EXPECT_EQ(json::parse(r->body)["prompt"],
            "<|im_start|>system\nYou are a helpful assistant<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n"
            "<|im_start|>assistant\n");
  for (const std::string bad :
       {R"({"messages": []})", R"({"messages": "hi"})", R"({})", R"({"messages": [)"}) {
    httplib::Client c("127.0.0.1", *port);
    auto e = c.Post("/apply-template", bad, "application/json");
    ASSERT_TRUE(e);
    EXPECT_EQ(e->status, 400) << bad;
    EXPECT_EQ(json::parse(e->body)["error"]["code"], 400) << bad;
  }
  s.stop();
}

// `kiln serve --sleep-idle-seconds 1` as a child process: it sleeps (the model's memory evicted,
// RSS down), wakes with the same output, and exits 0 at once on SIGTERM while asleep.
TEST(ServeSleep, CommandSleepsWakesAndExits) {
  std::string error;
  auto server = test::ServeProcess::start(
      {"-m", kQwen2, "-c", "256", "-t", "1", "--parallel", "2", "--sleep-idle-seconds", "1"}, &error);
  ASSERT_NE(server, nullptr) << error;
  const int port = server->port();

  const std::string before = greedy(port, "The quick brown fox", 16);
  ASSERT_FALSE(before.empty());
  const int64_t rss_awake = server->rss_kib();
  // The model's weights as the CPU counts them (the mapped pages it read); -1 when /v1/memory
  // does not answer.
  auto resident_weights = [&]() -> int64_t {
    auto m = get(port, "/v1/memory");
    if (!m || m->status != 200) return -1;
    int64_t bytes = 0;
    const json body = json::parse(m->body);
    for (const json& d : body["devices"])
      for (const json& o : d["owners"]) bytes += o["weights"].get<int64_t>();
    return bytes;
  };
  const int64_t weights = resident_weights();
  ASSERT_GT(weights, 0);
  // The server says it sleeps as its eviction starts (a request then wakes it); the pages are gone
  // once the residency manager counts the weights as evicted.
  ASSERT_TRUE(wait_for([&] { return props_sleeping(port) && resident_weights() == 0; }, 10));
  const int64_t rss_asleep = server->rss_kib();
  std::fprintf(stderr, "[ serve   ] VmRSS awake %lld KiB, asleep %lld KiB; weights %lld KiB\n",
               static_cast<long long>(rss_awake), static_cast<long long>(rss_asleep),
               static_cast<long long>(weights / 1024));
  // The weights' pages leave the process (most of the drop; the compute arena's touched pages go
  // too). What stays is the model's tokenizer and metadata, the KV cache (on the CPU) and the
  // slots' history: measured 99 MB awake, 87 MB asleep with this 151,936-token vocabulary.
  EXPECT_GT((rss_awake - rss_asleep) * 1024, weights * 3 / 4)
      << "awake " << rss_awake << " KiB, asleep " << rss_asleep << " KiB";
  auto h = get(port, "/health");
  ASSERT_TRUE(h);
  EXPECT_EQ(h->status, 200);

  EXPECT_EQ(greedy(port, "The quick brown fox", 16), before);
  EXPECT_FALSE(props_sleeping(port));

  ASSERT_TRUE(wait_for([&] { return props_sleeping(port); }, 10));
  const auto t0 = Clock::now();
  const int status = server->terminate(std::chrono::seconds(10));
  EXPECT_LT(std::chrono::duration<double>(Clock::now() - t0).count(), 2.0);
  EXPECT_TRUE(WIFEXITED(status)) << server->log();
  EXPECT_EQ(WEXITSTATUS(status), 0) << server->log();
}

}  // namespace
}  // namespace kiln::serve
