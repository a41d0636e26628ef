// `kiln serve` as a child process: the embedded default model (no -m), a free port printed on
// stderr, real requests, and a graceful exit 0 on SIGTERM.
#include <gtest/gtest.h>
#include "serve/http.h"
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <nlohmann/json.hpp>
#include <string>

namespace {

using nlohmann::json;

TEST(ServeCommand, EmbeddedModelAndGracefulShutdown) {
  int err[2];
  ASSERT_EQ(pipe(err), 0);
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    dup2(err[1], 2);
    close(err[0]);
    close(err[1]);
    const char* bin = KILN_BINARY_DIR "/kiln";
    execl(bin, bin, "serve", "--port", "0", "-c", "256", "-t", "1", "--parallel", "2", static_cast<char*>(nullptr));
    _exit(127);
  }
  close(err[1]);
  // An early failed assertion still ends the child.
  struct Reaper {
    pid_t pid;
    bool reaped = false;
    ~Reaper() {
      if (reaped) return;
      kill(pid, SIGKILL);
      waitpid(pid, nullptr, 0);
    }
  } reaper{pid};
  FILE* log = fdopen(err[0], "r");
  ASSERT_NE(log, nullptr);
  // "kiln serve: listening on http://127.0.0.1:PORT ..." then "kiln serve: ready: ..."
  int port = 0;
  bool ready = false;
  char line[512];
  while (!ready && std::fgets(line, sizeof line, log)) {
    if (const char* at = std::strstr(line, "http://127.0.0.1:")) port = std::atoi(at + 17);
    ready = std::strstr(line, "ready:") != nullptr;
  }
  ASSERT_TRUE(ready);
  ASSERT_GT(port, 0);
  httplib::Client c("127.0.0.1", port);
  c.set_read_timeout(30);
  auto health = c.Get("/health");
  ASSERT_TRUE(health);
  EXPECT_EQ(health->status, 200);
  auto r = c.Post("/v1/completions", json{{"prompt", "In the beginning"}, {"max_tokens", 4}, {"temperature", 0}}.dump(),
                  "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200) << r->body;
  EXPECT_EQ(json::parse(r->body)["usage"]["completion_tokens"].get<int>() > 0, true);
  kill(pid, SIGTERM);
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  reaper.reaped = true;
  EXPECT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
  std::fclose(log);
}

}  // namespace
