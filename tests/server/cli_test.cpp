// `kiln serve` as a child process: the embedded default model (no -m), a free port printed on
// stderr, real requests, and a graceful exit 0 on SIGTERM.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <chrono>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "http_client.h"
#include "serve_process.h"

namespace {

using nlohmann::json;

TEST(ServeCommand, EmbeddedModelAndGracefulShutdown) {
  std::string error;
  auto server = kiln::test::ServeProcess::start({"-c", "256", "-t", "1", "--parallel", "2"}, &error);
  ASSERT_NE(server, nullptr) << error;
  httplib::Client c("127.0.0.1", server->port());
  c.set_read_timeout(30);
  auto r = c.Post("/v1/completions", json{{"prompt", "In the beginning"}, {"max_tokens", 4}, {"temperature", 0}}.dump(),
                  "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200) << r->body;
  EXPECT_GT(json::parse(r->body)["usage"]["completion_tokens"].get<int>(), 0);
  const int status = server->terminate(std::chrono::seconds(30));
  EXPECT_TRUE(WIFEXITED(status)) << server->log();
  EXPECT_EQ(WEXITSTATUS(status), 0) << server->log();
}

// llama-server's slot flags: without -np, 4 slots over one pool of all -c cells; -np N with -kvu
// and --kv-unified-per-slot caps each slot in the pool.
TEST(ServeCommand, SlotFlagsResolveAsLlamaServers) {
  struct Case {
    std::vector<std::string> args;
    int slots, slot_ctx;
  };
  for (const Case& k :
       {Case{{"-c", "512", "-t", "1"}, 4, 512},
        Case{{"-c", "512", "-t", "1", "-np", "2", "-kvu", "--kv-unified-per-slot", "128"}, 2, 128},
        Case{{"-c", "512", "-t", "1", "-no-kvu"}, 4, 128}}) {
    std::string error;
    auto server = kiln::test::ServeProcess::start(k.args, &error);
    ASSERT_NE(server, nullptr) << error;
    httplib::Client c("127.0.0.1", server->port());
    auto r = c.Get("/props");
    ASSERT_TRUE(r);
    const json props = json::parse(r->body);
    EXPECT_EQ(props["total_slots"], k.slots) << server->log();
    EXPECT_EQ(props["n_ctx"], 512);
    EXPECT_EQ(props["default_generation_settings"]["n_ctx"], k.slot_ctx) << server->log();
  }
}

}  // namespace
