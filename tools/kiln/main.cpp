// `kiln SUBCOMMAND ...`: dispatches to the registered subcommands (see command.h).
#include <cstdio>
#include <cstring>
#include <map>
#include <string>

#include "command.h"

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

void print_usage() {
  std::printf("kiln: run open models on your own machine\n\nusage: kiln COMMAND [options]\n\ncommands:\n");
  for (const auto& [name, cmd] : registry()) std::printf("  %-12s %s\n", name.c_str(), cmd.summary.c_str());
  std::printf("\n`kiln COMMAND --help` shows a command's options.\n");
}

}  // namespace

CommandRegistrar::CommandRegistrar(std::string_view name, std::string_view summary, CommandFn fn) {
  registry().emplace(std::string(name), Command{std::string(summary), fn});
}

}  // namespace kiln::cli

int main(int argc, char** argv) {
  using namespace kiln::cli;
  if (argc < 2 || std::strcmp(argv[1], "--help") == 0 || std::strcmp(argv[1], "-h") == 0) {
    print_usage();
    return argc < 2 ? 2 : 0;
  }
  auto it = registry().find(argv[1]);
  if (it == registry().end()) {
    std::fprintf(stderr, "kiln: unknown command '%s'\n\n", argv[1]);
    print_usage();
    return 2;
  }
  return it->second.fn(argc - 2, argv + 2);
}
