// Reading a whole file the user names on the command line (a prompt, a chat template).
#pragma once

#include <string>

#include "core/result.h"

namespace kiln::cli {

// The bytes of `path`; an error naming the path when it cannot be read.
Result<std::string> read_text_file(const std::string& path);

}  // namespace kiln::cli
