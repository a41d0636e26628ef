#include "text_file.h"

#include <cstdio>
#include <fstream>
#include <sstream>

namespace kiln::cli {

Result<std::string> read_text_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return make_error("cannot read '", path, "'");
  std::stringstream ss;
  ss << in.rdbuf();
  if (in.bad()) return make_error("cannot read '", path, "'");
  return ss.str();
}

bool read_file_option(const std::string& path, const char* command, std::string* text) {
  if (path.empty()) return true;
  auto bytes = read_text_file(path);
  if (!bytes.ok()) {
    std::fprintf(stderr, "kiln %s: %s\n", command, bytes.error().message.c_str());
    return false;
  }
  *text = std::move(*bytes);
  return true;
}

}  // namespace kiln::cli
