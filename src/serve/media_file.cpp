#include "serve/media_file.h"

#include <sys/stat.h>

#include <climits>
#include <cstdlib>
#include <fstream>
#include <iterator>

#include "text/unicode.h"

namespace kiln::serve {
namespace {

// Codepoints a file name may not hold: controls, characters Windows forbids, and look-alikes of
// '.', '/' and '\' (llama-server's list).
bool forbidden(uint32_t c) {
  return c <= 0x1F || c == 0x7F || (c >= 0x80 && c <= 0x9F) || c == 0xFF0E || c == 0x2215 || c == 0x2216 ||
         (c >= 0xD800 && c <= 0xDFFF) || c > 0x10FFFF || c == text::kReplacementChar || c == 0xFEFF || c == ':' ||
         c == '*' || c == '?' || c == '"' || c == '<' || c == '>' || c == '|';
}

// The smallest codepoint each UTF-8 length may encode (shorter forms are overlong).
bool overlong(uint32_t c, size_t bytes) {
  return (bytes == 2 && c < 0x80) || (bytes == 3 && c < 0x800) || (bytes == 4 && c < 0x10000);
}

std::string real_path(const std::string& path) {
  char buf[PATH_MAX];
  return realpath(path.c_str(), buf) != nullptr ? std::string(buf) : std::string();
}

}  // namespace

bool valid_media_file_name(std::string_view path) {
  if (path.empty() || path.size() > 255) return false;
  for (size_t offset = 0; offset < path.size();) {
    const size_t start = offset;
    const uint32_t c = text::decode_utf8(path, offset);
    if (forbidden(c) || overlong(c, offset - start)) return false;
  }
  return path.front() != ' ' && path.back() != ' ' && path.back() != '.' &&
         path.find("..") == std::string_view::npos;
}

Result<std::string> read_media_file(const std::string& media_dir, std::string_view path, size_t max_bytes) {
  const std::string shown(path);
  if (!valid_media_file_name(path)) return make_error("file path is not allowed: '", shown, "'");
  const std::string dir = real_path(media_dir);
  const std::string file = real_path(media_dir + "/" + shown);
  if (dir.empty()) return make_error("the media folder '", media_dir, "' is gone");
  if (file.empty()) return make_error("no file '", shown, "' in the media folder");
  if (!file.starts_with(dir + "/")) return make_error("'", shown, "' leads out of the media folder");
  struct stat st {};
  if (stat(file.c_str(), &st) != 0 || !S_ISREG(st.st_mode))
    return make_error("'", shown, "' is not a regular file");
  if (static_cast<size_t>(st.st_size) > max_bytes)
    return make_error("'", shown, "' has ", st.st_size, " bytes, more than the ", max_bytes, " a request may carry");
  std::ifstream in(file, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) return make_error("'", shown, "' cannot be read");
  if (bytes.size() > max_bytes) return make_error("'", shown, "' grew past ", max_bytes, " bytes while read");
  return bytes;
}

}  // namespace kiln::serve
