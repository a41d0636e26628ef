// Reading a whole file the user names on the command line (a prompt, a chat template).
#pragma once

#include <string>

#include "core/result.h"

namespace kiln::cli {

// The bytes of `path`; an error naming the path when it cannot be read.
Result<std::string> read_text_file(const std::string& path);

// For a -f/--file option: replaces *text with the bytes of `path` when `path` is not empty; on an
// error prints "kiln COMMAND: ..." and returns false.
bool read_file_option(const std::string& path, const char* command, std::string* text);

}  // namespace kiln::cli
