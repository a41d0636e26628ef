#include "core/json_file.h"

#include <fstream>
#include <set>
#include <sstream>

namespace kiln {

Result<std::string> read_text_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return make_error("convert: cannot open '", path, "'");
  std::stringstream ss;
  ss << in.rdbuf();
  if (in.bad()) return make_error("convert: cannot read '", path, "'");
  return ss.str();
}

Result<nlohmann::json> parse_json_text(std::string_view text, const std::string& what) {
  using json = nlohmann::json;
  std::string duplicate;
  std::set<std::string> seen;
  json::parser_callback_t cb = [&](int depth, json::parse_event_t event, json& parsed) {
    if (event == json::parse_event_t::key && depth == 1) {
      std::string key = parsed.get<std::string>();
      if (!seen.insert(key).second && duplicate.empty()) duplicate = key;
    }
    return true;
  };
  json j;
  try {
    j = json::parse(text.begin(), text.end(), cb);
  } catch (const json::exception& e) {
    return make_error(what, ": invalid JSON: ", e.what());
  }
  if (!duplicate.empty()) return make_error(what, ": duplicate name '", duplicate, "'");
  return j;
}

Result<nlohmann::json> read_json_file(const std::string& path) {
  KILN_ASSIGN_OR_RETURN(std::string text, read_text_file(path));
  return parse_json_text(text, path);
}

}  // namespace kiln
