// Subcommands of the `kiln` executable. Each lives in its own cmd_<name>.cpp and registers itself:
//   KILN_COMMAND(inspect, "show a GGUF file's metadata and tensors", run_inspect);
// where run_inspect(int argc, char** argv) receives the arguments after the subcommand name and
// returns the process exit code.
#pragma once

#include <string_view>

namespace kiln::cli {

using CommandFn = int (*)(int argc, char** argv);

struct CommandRegistrar {
  CommandRegistrar(std::string_view name, std::string_view summary, CommandFn fn);
};

}  // namespace kiln::cli

#define KILN_COMMAND(name, summary, fn) \
  static ::kiln::cli::CommandRegistrar kiln_command_registrar_##name(#name, summary, fn)
