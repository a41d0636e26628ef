// Files the user names on the command line: reading one whole (a prompt, a chat template), and
// checking an output path before long work starts.
#pragma once

#include <string>

#include "core/result.h"

namespace kiln::cli {

// The bytes of `path`; an error naming the path when it cannot be read.
Result<std::string> read_text_file(const std::string& path);

// Whether a file can be created at `path`: its folder exists and is writable, and `path` is not a
// folder. The error names the path (and the folder).
Status check_output_path(const std::string& path);

// For a -f/--file option: replaces *text with the bytes of `path` when `path` is not empty, less
// one newline at the end (as llama.cpp's -f: a prompt file's last line break is not prompt); on an
// error prints "kiln COMMAND: ..." and returns false.
bool read_file_option(const std::string& path, const char* command, std::string* text);

}  // namespace kiln::cli
