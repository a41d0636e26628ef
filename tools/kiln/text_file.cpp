#include "text_file.h"

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

}  // namespace kiln::cli
