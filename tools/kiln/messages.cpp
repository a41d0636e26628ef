#include "messages.h"

#include <cstdio>
#include <string>

namespace kiln::cli {
namespace {

void print_line(std::string_view command, std::string_view kind, std::string_view message) {
  const std::string prefix = std::string(command) + ": ";
  if (message.starts_with(prefix)) message.remove_prefix(prefix.size());
  std::string line = "kiln " + prefix;
  line += kind;
  line += message;
  line += '\n';
  std::fputs(line.c_str(), stderr);
}

}  // namespace

void print_error(std::string_view command, std::string_view message) { print_line(command, "", message); }

void print_warning(std::string_view command, std::string_view message) {
  print_line(command, "warning: ", message);
}

int fail(std::string_view command, std::string_view message, int exit_code) {
  print_error(command, message);
  return exit_code;
}

}  // namespace kiln::cli
