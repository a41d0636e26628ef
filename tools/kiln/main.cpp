// `kiln COMMAND ...`: dispatches to the registered subcommands (see command.h); `kiln --version`;
// `kiln help [COMMAND]`.
#include <csignal>
#include <cstdio>
#include <map>
#include <string>
#include <string_view>

#include "build_info.h"
#include "command.h"
#include "ops/cpu_features.h"

namespace kiln::cli {
namespace {

struct Command {
  std::string summary;
  CommandFn fn;
};

std::map<std::string, Command, std::less<>>& registry() {
  static std::map<std::string, Command, std::less<>> commands;
  return commands;
}

void print_usage(FILE* out) {
  std::string text =
      "kiln: run open models on your own machine\n\nusage: kiln COMMAND [options]\n\ncommands:\n";
  for (const auto& [name, cmd] : registry()) {
    char line[256];
    std::snprintf(line, sizeof line, "  %-12s %s\n", name.c_str(), cmd.summary.c_str());
    text += line;
  }
  text +=
      "\n`kiln help COMMAND` (or `kiln COMMAND --help`) shows a command's options; `kiln --version` the "
      "build.\n";
  std::fputs(text.c_str(), out);
}

const char* compiler() {
#if defined(__clang__)
  return "clang " __clang_version__;
#elif defined(__GNUC__)
  return "gcc " __VERSION__;
#else
  return "an unknown compiler";
#endif
}

// Whether this build has the Vulkan backend (CMake's KILN_HAVE_VULKAN).
const char* gpu_backends() {
#ifdef KILN_HAVE_VULKAN
  return "vulkan (--list-devices shows the devices)";
#else
  return "none (built without the Vulkan headers, loader or glslc: cpu and sim devices only)";
#endif
}

void print_version() {
  std::printf("kiln %s (commit %s)\nbuilt with %s (%s)\ncpu kernels: %s\ngpu backends: %s\n", kVersion, kCommit,
              compiler(), kBuildType, cpu_kernel_features().c_str(), gpu_backends());
}

int unknown_command(std::string_view name) {
  std::fprintf(stderr, "kiln: unknown command '%.*s'\n\n", static_cast<int>(name.size()), name.data());
  print_usage(stderr);
  return 2;
}

// `kiln help [COMMAND]`.
int run_help(int argc, char** argv) {
  if (argc == 0) {
    print_usage(stdout);
    return 0;
  }
  auto it = registry().find(argv[0]);
  if (it == registry().end()) return unknown_command(argv[0]);
  char help_flag[] = "--help";
  char* args[] = {help_flag, nullptr};
  return it->second.fn(1, args);
}

}  // namespace

CommandRegistrar::CommandRegistrar(std::string_view name, std::string_view summary, CommandFn fn) {
  registry().emplace(std::string(name), Command{std::string(summary), fn});
}

}  // namespace kiln::cli

int main(int argc, char** argv) {
  using namespace kiln::cli;
  // A write past a file-size limit (RLIMIT_FSIZE: a --swap-dir file, a converted model) fails with
  // EFBIG, reported with its cause as a full disk is, instead of killing the process (SIGXFSZ).
  std::signal(SIGXFSZ, SIG_IGN);
  if (argc < 2) {
    print_usage(stderr);
    return 2;
  }
  const std::string_view first = argv[1];
  if (first == "--help" || first == "-h") {
    print_usage(stdout);
    return 0;
  }
  if (first == "--version") {
    print_version();
    return 0;
  }
  if (first == "help") return run_help(argc - 2, argv + 2);
  auto it = registry().find(first);
  if (it == registry().end()) return unknown_command(first);
  return it->second.fn(argc - 2, argv + 2);
}
