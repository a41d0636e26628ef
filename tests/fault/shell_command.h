// Runs a shell command line and collects what it prints: the CLI tests start `kiln` this way.
#pragma once

#include <gtest/gtest.h>
#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <string>
#include <vector>

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

// The devices under which `-v`'s memory breakdown (printed by run, chat, bench) lists an owner whose
// name starts with `owner`, one entry per such owner, in the breakdown's order. A device's section
// starts at its line " - NAME  |"; its owners' lines are "   - OWNER #ID  |".
inline std::vector<std::string> devices_holding(const std::string& out, const std::string& owner) {
  std::vector<std::string> found;
  std::string device;
  size_t at = out.find("memory breakdown [MiB]");
  while (at != std::string::npos && at < out.size()) {
    const size_t end = out.find('\n', at);
    const std::string line = out.substr(at, end == std::string::npos ? std::string::npos : end - at);
    if (line.starts_with(" - ")) {
      device = line.substr(3, line.find_first_of(" |", 3) - 3);
    } else if (line.starts_with("   - " + owner)) {
      found.push_back(device);
    }
    at = end == std::string::npos ? end : end + 1;
  }
  return found;
}

}  // namespace kiln::test
