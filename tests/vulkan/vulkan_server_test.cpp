// `kiln serve --device vulkan0`: 8 streams decoding together in one batch give each request the text
// it gets alone (the shaders' arithmetic of a row does not depend on its batch: matrix products
// sum each column on its own, attention each query row), and /v1/memory reports the device's
// figures with the model's weights and KV cache and the device's compute arena under their owners.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <thread>

#include "http_client.h"
#include "serve/server.h"
#include "test_data.h"

namespace kiln::serve {
namespace {

using nlohmann::json;

std::string complete(int port, const std::string& prompt) {
  httplib::Client c("127.0.0.1", port);
  c.set_read_timeout(300);
  const json body = {{"prompt", prompt}, {"max_tokens", 12}, {"temperature", 0}};
  auto r = c.Post("/v1/completions", body.dump(), "application/json");
  EXPECT_TRUE(r);
  if (!r) return "";
  EXPECT_EQ(r->status, 200) << r->body;
  return json::parse(r->body)["choices"][0]["text"].get<std::string>();
}

TEST(VulkanServer, EightConcurrentStreamsGiveTheirTextsAlone) {
  auto model = Model::load(test_data::path("models/qwen2-e64-Q8_0.gguf"));
  ASSERT_TRUE(model.ok()) << model.error().message;
  ServerOptions o;
  o.n_parallel = 8;
  o.n_threads = 2;
  o.context.n_ctx = 8 * 64;
  o.device = "vulkan0";
  o.vulkan = true;
  Server server(o);
  auto port = server.listen("127.0.0.1", 0);
  ASSERT_TRUE(port.ok());
  const Status attached = server.attach(*model);
  ASSERT_TRUE(attached.ok()) << attached.error().message;
  std::vector<std::string> prompts;
  for (int i = 0; i < 8; ++i) prompts.push_back("Request number " + std::to_string(i) + " asks about");
  std::vector<std::string> alone, together(prompts.size());
  for (const std::string& p : prompts) alone.push_back(complete(*port, p));
  std::vector<std::thread> clients;
  for (size_t i = 0; i < prompts.size(); ++i)
    clients.emplace_back([&, i] { together[i] = complete(*port, prompts[i]); });
  for (auto& t : clients) t.join();
  for (size_t i = 0; i < prompts.size(); ++i) {
    EXPECT_FALSE(alone[i].empty());
    EXPECT_EQ(together[i], alone[i]) << "request " << i;
  }

  httplib::Client c("127.0.0.1", *port);
  auto r = c.Get("/v1/memory");
  ASSERT_TRUE(r && r->status == 200);
  const json memory = json::parse(r->body);
  const json* gpu = nullptr;
  for (const json& d : memory["devices"])
    if (d["device"] == "vulkan0") gpu = &d;
  ASSERT_TRUE(gpu != nullptr) << memory.dump();
  EXPECT_EQ((*gpu)["unaccounted"], 0) << gpu->dump();
  bool weights = false, arena = false;
  for (const json& w : (*gpu)["owners"]) {
    weights = weights || (w["weights"].get<size_t>() > 0 && w["kv"].get<size_t>() > 0);
    arena = arena || w["name"] == "compute (vulkan0)";
  }
  EXPECT_TRUE(weights && arena) << gpu->dump();
  server.stop();
}

}  // namespace
}  // namespace kiln::serve
