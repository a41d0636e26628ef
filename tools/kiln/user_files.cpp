#include "user_files.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "messages.h"

namespace kiln::cli {

Result<std::string> read_text_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return make_error("cannot read '", path, "'");
  std::stringstream ss;
  ss << in.rdbuf();
  if (in.bad()) return make_error("cannot read '", path, "'");
  return ss.str();
}

Status check_output_path(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (fs::is_directory(path, ec)) return make_error("cannot write '", path, "': it is a folder");
  fs::path folder = fs::path(path).parent_path();
  if (folder.empty()) folder = ".";
  if (!fs::is_directory(folder, ec))
    return make_error("cannot write '", path, "': the folder '", folder.string(), "' does not exist");
  if (::access(folder.c_str(), W_OK) != 0)
    return make_error("cannot write '", path, "': the folder '", folder.string(), "' is not writable");
  return ok_status();
}

bool read_file_option(const std::string& path, const char* command, std::string* text) {
  if (path.empty()) return true;
  auto bytes = read_text_file(path);
  if (!bytes.ok()) {
    print_error(command, bytes.error().message);
    return false;
  }
  *text = std::move(*bytes);
  if (!text->empty() && text->back() == '\n') text->pop_back();  // as llama.cpp's -f
  return true;
}

}  // namespace kiln::cli
