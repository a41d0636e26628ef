// A server whose model runs on a sim device (ServerOptions::device, as `kiln serve --device sim0`)
// answers exactly what the same server on the CPU answers: completions with log-probabilities
// (several slots decoding together) and embeddings (the embedder's own context and backend on the
// device); a model that does not fit the device is refused at attach with the numbers; its memory
// is reported per device and model (GET /v1/memory, /metrics).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <thread>

#include "http_client.h"
#include "serve/server.h"
#include "test_data.h"

namespace kiln::serve {
namespace {

using nlohmann::json;

// The qwen2 fixture (its weights take 15 MiB).
Result<std::shared_ptr<const Model>> load_model() {
  return Model::load(test_data::path("models/qwen2-e64-Q8_0.gguf"));
}

ServerOptions options(const std::string& device, size_t sim_capacity = size_t{256} << 20) {
  ServerOptions o;
  o.n_parallel = 2;
  o.n_threads = 2;
  o.context.n_ctx = 256;
  o.embeddings = true;
  o.device = device;
  o.sim_devices = {{.name = "sim0", .capacity = sim_capacity}};
  return o;
}

json post(int port, const std::string& path, const json& body) {
  httplib::Client c("127.0.0.1", port);
  c.set_read_timeout(60);
  auto r = c.Post(path.c_str(), body.dump(), "application/json");
  EXPECT_TRUE(r);
  if (!r) return json();
  EXPECT_EQ(r->status, 200) << r->body;
  json j = json::parse(r->body);
  j.erase("id");
  j.erase("created");
  j.erase("timings");
  j.erase("usage");  // cached_tokens depends on which slot a request lands in
  return j;
}

TEST(ServerOnSimDevice, AnswersAsTheCpuDoes) {
  const auto model = load_model();
  ASSERT_TRUE(model.ok()) << model.error().message;
  std::vector<std::unique_ptr<Server>> servers;
  std::vector<int> ports;
  for (const char* device : {"cpu", "sim0"}) {
    servers.push_back(std::make_unique<Server>(options(device)));
    auto port = servers.back()->listen("127.0.0.1", 0);
    ASSERT_TRUE(port.ok());
    ASSERT_TRUE(servers.back()->attach(*model).ok()) << device;
    ports.push_back(*port);
  }
  const json completion = {
      {"prompt", "The capital of France"}, {"max_tokens", 12}, {"temperature", 0}, {"logprobs", 3}};
  const json embedding = {{"input", {"first input", "and a second, longer input"}}};
  for (int port : ports) EXPECT_FALSE(post(port, "/v1/completions", completion).empty());
  std::vector<json> answers[2];
  for (size_t s = 0; s < 2; ++s) {
    // Two requests at once: the slots decode together in one batch.
    json a, b;
    std::thread other([&] { b = post(ports[s], "/v1/completions", completion); });
    a = post(ports[s], "/v1/completions", completion);
    other.join();
    answers[s] = {a, b, post(ports[s], "/v1/embeddings", embedding)};
  }
  ASSERT_EQ(answers[0].size(), answers[1].size());
  for (size_t i = 0; i < answers[0].size(); ++i)
    EXPECT_EQ(answers[0][i], answers[1][i])
        << "answer " << i << ": " << json::diff(answers[0][i], answers[1][i]).dump();
  EXPECT_EQ(answers[1][0]["choices"][0]["text"], answers[1][1]["choices"][0]["text"]);
  for (auto& s : servers) s->stop();
}

std::string get(int port, const char* path) {
  httplib::Client c("127.0.0.1", port);
  c.set_read_timeout(60);
  auto r = c.Get(path);
  EXPECT_TRUE(r);
  if (!r) return "";
  EXPECT_EQ(r->status, 200) << r->body;
  return r->body;
}

// GET /v1/memory and the /metrics gauges give the residency manager's breakdown: on a budgeted
// sim0 the model's weights and KV cache under its owner, the device's compute arena under an
// owner of its own, nothing unaccounted, and the same figures in both routes.
TEST(ServerOnSimDevice, ReportsItsMemoryPerDeviceAndModel) {
  const auto model = load_model();
  ASSERT_TRUE(model.ok()) << model.error().message;
  ServerOptions o = options("sim0", size_t{512} << 20);
  o.budgets = {{.device = "sim0", .gib = 0.375}};  // the arena holds 256 rows of 151,936 logits
  Server server(o);
  auto port = server.listen("127.0.0.1", 0);
  ASSERT_TRUE(port.ok());
  const Status attached = server.attach(*model);
  ASSERT_TRUE(attached.ok()) << attached.error().message;
  EXPECT_FALSE(post(*port, "/v1/completions", {{"prompt", "Hello"}, {"max_tokens", 2}}).empty());

  const json memory = json::parse(get(*port, "/v1/memory"));
  ASSERT_EQ(memory["devices"].size(), 2u) << memory.dump();
  const json& sim = memory["devices"][1];
  EXPECT_EQ(sim["device"], "sim0");
  EXPECT_EQ(sim["budget"], size_t{384} << 20);
  EXPECT_EQ(sim["unaccounted"], 0) << sim.dump();
  EXPECT_LE(sim["counted"].get<size_t>(), sim["budget"].get<size_t>());
  // The model, the device's compute arena and the backend's kernel scratch (owners of their own);
  // every counted byte is theirs.
  ASSERT_EQ(sim["owners"].size(), 3u) << sim.dump();
  size_t sum = 0;
  const json* owner = nullptr;
  const json* arena = nullptr;
  for (const json& o : sim["owners"]) {
    for (const char* kind : {"weights", "kv", "compute", "scratch"}) sum += o[kind].get<size_t>();
    if (o["weights"] > 0) owner = &o;
    if (o["name"] == "compute (sim0)") arena = &o;
  }
  EXPECT_EQ(sum, sim["counted"].get<size_t>());
  ASSERT_TRUE(owner != nullptr && arena != nullptr) << sim.dump();
  EXPECT_EQ((*owner)["name"], model->get()->name());
  EXPECT_GT((*owner)["weights"].get<size_t>(), size_t{8} << 20);
  EXPECT_GT((*owner)["kv"].get<size_t>(), 0u);
  // The model's own compute is its input buffer; the arena holds 256 rows of 151,936 logits.
  EXPECT_LT((*owner)["compute"].get<size_t>(), size_t{16} << 20);
  EXPECT_GT((*arena)["compute"].get<size_t>(), size_t{256 * 151936 * 4});
  EXPECT_EQ((*arena)["weights"], 0);
  EXPECT_EQ((*arena)["kv"], 0);

  const std::string metrics = get(*port, "/metrics");
  for (const json* who : {owner, arena}) {
    const std::string owner_labels = "device=\"sim0\",owner=\"" + (*who)["name"].get<std::string>() + " #" +
                                     std::to_string((*who)["id"].get<uint64_t>()) + "\"";
    for (const char* kind : {"weights", "kv", "compute"}) {
      const std::string line = "kiln:memory_owner_bytes{" + owner_labels + ",kind=\"" + kind + "\"} " +
                               std::to_string((*who)[kind].get<size_t>()) + "\n";
      EXPECT_NE(metrics.find(line), std::string::npos) << line << "not in\n" << metrics;
    }
  }
  EXPECT_NE(metrics.find("kiln:memory_device_bytes{device=\"sim0\",what=\"budget\"} 402653184\n"),
            std::string::npos)
      << metrics;
  server.stop();
}

// With --fit off a model that does not fit its device is refused at attach with the sizes (with
// --fit on, the default, it would load split: tests/server/models_test.cpp).
TEST(ServerOnSimDevice, AModelThatDoesNotFitIsRefusedAtAttach) {
  const auto model = load_model();
  ASSERT_TRUE(model.ok()) << model.error().message;
  ServerOptions o = options("sim0", size_t{8} << 20);
  o.split.fit = false;
  Server server(o);
  const Status st = server.attach(*model);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.error().message.find("do not fit: sim0: out of memory"), std::string::npos)
      << st.error().message;
  server.stop();
}

}  // namespace
}  // namespace kiln::serve
