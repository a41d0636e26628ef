// The server's lifecycle: idle sleep (the model released: its file unmapped, memory returned; the
// next request reloads it and gets the same output), waking under concurrent requests, a failed
// reload, /health and /props while asleep, POST /apply-template against the template fixtures,
// and `kiln serve --sleep-idle-seconds` as a child process (RSS drop, graceful exit).
// Models are copied to per-process paths, so that "is the file mapped" sees only this server's
// mapping (other tests of this binary keep their own Models of the fixtures).
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "http_client.h"
#include "serve/server.h"
#include "serve/server_state.h"
#include "serve_process.h"
#include "test_data.h"

namespace kiln::serve {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

const std::string kQwen2 = kiln::test_data::path("models/qwen2-e64-Q8_0.gguf");
// The project's trained model: clear greedy margins, so concurrent slots give the same text as
// one alone (see server_test.cpp).
const char* kKjv = KILN_SOURCE_DIR "/models/kjv-llama-q8_0.gguf";

// A copy of `src` at a path of this process, removed with the object.
struct ModelCopy {
  std::string path;
  explicit ModelCopy(const std::string& src, const char* tag) {
    path = (fs::temp_directory_path() / ("kiln-lifecycle-" + std::to_string(getpid()) + "-" + tag + ".gguf"))
               .string();
    fs::copy_file(src, path, fs::copy_options::overwrite_existing);
  }
  ~ModelCopy() {
    std::error_code ec;
    fs::remove(path, ec);
    fs::remove(path + ".away", ec);
  }
};

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Whether `path` appears in the memory map of process `pid` ("self" for this one).
bool mapped(const std::string& path, const std::string& pid = "self") {
  return read_text("/proc/" + pid + "/maps").find(path) != std::string::npos;
}

bool wait_for(const std::function<bool()>& pred, double seconds) {
  const auto end = Clock::now() + std::chrono::duration<double>(seconds);
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
  o.sleep_idle_seconds = 1;
  return o;
}

// A loader of `path` that counts its calls.
ModelLoader counting_loader(const std::string& path, std::atomic<int>& loads) {
  return [path, &loads]() -> Result<std::shared_ptr<const Model>> {
    ++loads;
    return Model::load(path);
  };
}

TEST(IdleSleep, ReleasesTheModelAndWakesWithTheSameOutput) {
  ModelCopy copy(kQwen2, "qwen2");
  std::atomic<int> loads{0};
  Server s(sleepy_options());
  auto port = s.listen("127.0.0.1", 0);
  ASSERT_TRUE(port.ok());
  ASSERT_TRUE(s.attach(counting_loader(copy.path, loads)).ok());
  EXPECT_TRUE(mapped(copy.path));

  const std::string before = greedy(*port, "The quick brown fox");
  const auto answered = Clock::now();
  ASSERT_FALSE(before.empty());
  EXPECT_FALSE(props_sleeping(*port)) << "asleep right after a request";

  ASSERT_TRUE(wait_for([&] { return s.sleeping(); }, 10));
  EXPECT_GE(std::chrono::duration<double>(Clock::now() - answered).count(), 0.9)
      << "slept before 1 s of idleness";
  EXPECT_FALSE(mapped(copy.path)) << "the model file is still mapped while asleep";

  // Health, properties and info answer without waking it.
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
  EXPECT_EQ(p["model_path"], copy.path);
  EXPECT_EQ(p["total_slots"], 4);
  EXPECT_EQ(p["n_ctx"], 256);
  EXPECT_EQ(p["default_generation_settings"]["n_ctx"], 64);
  EXPECT_EQ(p["eos_token"], "<|endoftext|>");
  EXPECT_NE(p["chat_template"].get<std::string>().find("<|im_start|>"), std::string::npos);
  EXPECT_TRUE(s.sleeping());
  EXPECT_FALSE(mapped(copy.path));
  EXPECT_EQ(loads.load(), 1);

  // The next completion reloads the same file and gives the same greedy text.
  EXPECT_EQ(greedy(*port, "The quick brown fox"), before);
  EXPECT_EQ(loads.load(), 2);
  EXPECT_FALSE(s.sleeping());
  EXPECT_TRUE(mapped(copy.path));
  auto h = get(*port, "/health");
  ASSERT_TRUE(h);
  EXPECT_EQ(json::parse(h->body), json({{"status", "ok"}}));
  s.stop();
}

TEST(IdleSleep, ConcurrentRequestsWaitForOneReload) {
  ModelCopy copy(kKjv, "kjv");
  std::atomic<int> loads{0};
  Server s(sleepy_options());
  auto port = s.listen("127.0.0.1", 0);
  ASSERT_TRUE(port.ok());
  ASSERT_TRUE(s.attach(counting_loader(copy.path, loads)).ok());
  const std::string prompt = "And God said";
  const std::string expect = greedy(*port, prompt);
  ASSERT_FALSE(expect.empty());
  ASSERT_TRUE(wait_for([&] { return s.sleeping(); }, 10));

  // Every request that arrives while asleep waits for the one reload and succeeds.
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
  EXPECT_EQ(loads.load(), 2) << "one reload serves every waiting request";
  s.stop();
}

TEST(IdleSleep, FailedReloadAnswers503AndKeepsServing) {
  ModelCopy copy(kKjv, "kjv-away");
  std::atomic<int> loads{0};
  Server s(sleepy_options());
  auto port = s.listen("127.0.0.1", 0);
  ASSERT_TRUE(port.ok());
  ASSERT_TRUE(s.attach(counting_loader(copy.path, loads)).ok());
  const std::string expect = greedy(*port, "In the beginning");
  ASSERT_TRUE(wait_for([&] { return s.sleeping(); }, 10));

  fs::rename(copy.path, copy.path + ".away");
  auto r =
      post(*port, "/v1/completions", {{"prompt", "In the beginning"}, {"max_tokens", 8}, {"temperature", 0}});
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 503);
  const std::string message = json::parse(r->body)["error"]["message"];
  EXPECT_NE(message.find("reloading the model failed"), std::string::npos) << message;
  EXPECT_NE(message.find(copy.path), std::string::npos) << message;
  auto h = get(*port, "/health");
  ASSERT_TRUE(h);
  EXPECT_EQ(h->status, 200);
  EXPECT_TRUE(s.sleeping());

  fs::rename(copy.path + ".away", copy.path);
  EXPECT_EQ(greedy(*port, "In the beginning"), expect);
  EXPECT_EQ(loads.load(), 3);
  s.stop();
}

TEST(IdleSleep, AttachedModelWithoutLoaderNeverSleeps) {
  auto m = Model::load(kKjv);
  ASSERT_TRUE(m.ok());
  Server s(sleepy_options());
  auto port = s.listen("127.0.0.1", 0);
  ASSERT_TRUE(port.ok());
  ASSERT_TRUE(s.attach(*m).ok());
  EXPECT_FALSE(greedy(*port, "And").empty());
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  EXPECT_FALSE(s.sleeping());
  EXPECT_FALSE(props_sleeping(*port));
  s.stop();
}

TEST(IdleSleep, SleepingServerStopsAtOnce) {
  ModelCopy copy(kKjv, "kjv-stop");
  std::atomic<int> loads{0};
  Server s(sleepy_options());
  auto port = s.listen("127.0.0.1", 0);
  ASSERT_TRUE(port.ok());
  ASSERT_TRUE(s.attach(counting_loader(copy.path, loads)).ok());
  ASSERT_TRUE(wait_for([&] { return s.sleeping(); }, 10));
  const auto t0 = Clock::now();
  s.stop();
  EXPECT_LT(std::chrono::duration<double>(Clock::now() - t0).count(), 1.0);
  EXPECT_EQ(loads.load(), 1) << "stopping must not wake the model";
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

// `kiln serve --sleep-idle-seconds 1` as a child process: it sleeps (the file unmapped, RSS down),
// wakes with the same output, and exits 0 at once on SIGTERM while asleep.
TEST(ServeSleep, CommandSleepsWakesAndExits) {
  ModelCopy copy(kQwen2, "qwen2-cli");
  std::string error;
  auto server = test::ServeProcess::start(
      {"-m", copy.path, "-c", "256", "-t", "1", "--parallel", "2", "--sleep-idle-seconds", "1"}, &error);
  ASSERT_NE(server, nullptr) << error;
  const int port = server->port();
  const std::string spid = std::to_string(server->pid());

  const std::string before = greedy(port, "The quick brown fox", 16);
  ASSERT_FALSE(before.empty());
  const int64_t rss_awake = server->rss_kib();
  EXPECT_TRUE(mapped(copy.path, spid));
  ASSERT_TRUE(wait_for([&] { return props_sleeping(port); }, 10));
  const int64_t rss_asleep = server->rss_kib();
  EXPECT_FALSE(mapped(copy.path, spid));
  std::fprintf(stderr, "[ serve   ] VmRSS awake %lld KiB, asleep %lld KiB\n",
               static_cast<long long>(rss_awake), static_cast<long long>(rss_asleep));
  // At least the 16 MB file's weights (a completion reads every one); with the KV cache and
  // compute arena it measured 102 MB awake, 13 MB asleep.
  EXPECT_GT(rss_awake - rss_asleep, 16 * 1024)
      << "awake " << rss_awake << " KiB, asleep " << rss_asleep << " KiB";
  auto h = get(port, "/health");
  ASSERT_TRUE(h);
  EXPECT_EQ(h->status, 200);

  EXPECT_EQ(greedy(port, "The quick brown fox", 16), before);
  EXPECT_FALSE(props_sleeping(port));
  EXPECT_TRUE(mapped(copy.path, spid));

  ASSERT_TRUE(wait_for([&] { return props_sleeping(port); }, 10));
  const auto t0 = Clock::now();
  const int status = server->terminate(std::chrono::seconds(10));
  EXPECT_LT(std::chrono::duration<double>(Clock::now() - t0).count(), 2.0);
  EXPECT_TRUE(WIFEXITED(status)) << server->log();
  EXPECT_EQ(WEXITSTATUS(status), 0) << server->log();
}

}  // namespace
}  // namespace kiln::serve
