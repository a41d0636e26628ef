// The lines `kiln` prints for the user on stderr, in one format:
//   kiln COMMAND: what went wrong
//   kiln COMMAND: warning: what may go wrong
// Library errors carry a "[where]: " prefix (core/result.h); when it repeats the command's name
// ("quantize: ..." under `kiln quantize`) it is printed once.
#pragma once

#include <string_view>

namespace kiln::cli {

void print_error(std::string_view command, std::string_view message);
void print_warning(std::string_view command, std::string_view message);

// print_error, then returns `exit_code` (for `return fail("run", msg);`).
int fail(std::string_view command, std::string_view message, int exit_code = 1);

}  // namespace kiln::cli
