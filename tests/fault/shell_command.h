// Runs a shell command line and collects what it prints: the CLI tests start `kiln` this way.
#pragma once

#include <gtest/gtest.h>
#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <string>

namespace kiln::test {

struct CliResult {
  int exit_code;    // the command's exit status, or 128 + the signal that ended it
  std::string out;  // what it wrote to the pipe (stdout, plus stderr where the line redirects it)
};

// `cmd` through popen(), read to its end.
inline CliResult run_shell(const std::string& cmd) {
  FILE* pipe = popen(cmd.c_str(), "r");
  EXPECT_NE(pipe, nullptr) << cmd;
  if (pipe == nullptr) return {-1, ""};
  std::string out;
  std::array<char, 4096> buf{};
  size_t n = 0;
  while ((n = fread(buf.data(), 1, buf.size(), pipe)) > 0) out.append(buf.data(), n);
  const int status = pclose(pipe);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status), out};
}

}  // namespace kiln::test
