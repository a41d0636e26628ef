// `kiln serve` as a child process: the embedded default model (no -m), a free port printed on
// stderr, real requests, and a graceful exit 0 on SIGTERM.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <chrono>
#include <nlohmann/json.hpp>
#include <string>

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

}  // namespace
