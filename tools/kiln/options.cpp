#include "options.h"

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <limits>

namespace kiln::cli {
namespace {

std::string parse_int(const std::string& s, int64_t lo, int64_t hi, int64_t* out) {
  errno = 0;
  char* end = nullptr;
  const long long v = std::strtoll(s.c_str(), &end, 10);
  if (s.empty() || *end != '\0' || errno == ERANGE) return "'" + s + "' is not an integer";
  if (v < lo || v > hi) return "'" + s + "' is out of range";
  *out = v;
  return "";
}

}  // namespace

OptionParser::OptionParser(std::string command, std::string usage)
    : command_(std::move(command)), usage_(std::move(usage)) {}

void OptionParser::flag(std::vector<std::string> names, bool* out, std::string help) {
  options_.push_back({std::move(names), "", std::move(help), [out](const std::string&) {
                        *out = true;
                        return std::string();
                      }});
}

void OptionParser::value(std::vector<std::string> names, std::string* out, std::string metavar, std::string help) {
  custom(std::move(names), [out](const std::string& v) {
    *out = v;
    return std::string();
  }, std::move(metavar), std::move(help));
}

void OptionParser::value(std::vector<std::string> names, int64_t* out, std::string metavar, std::string help) {
  custom(std::move(names), [out](const std::string& v) {
    return parse_int(v, std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max(), out);
  }, std::move(metavar), std::move(help));
}

void OptionParser::value(std::vector<std::string> names, int32_t* out, std::string metavar, std::string help) {
  custom(std::move(names), [out](const std::string& v) {
    int64_t wide = 0;
    std::string err = parse_int(v, std::numeric_limits<int32_t>::min(), std::numeric_limits<int32_t>::max(), &wide);
    if (err.empty()) *out = static_cast<int32_t>(wide);
    return err;
  }, std::move(metavar), std::move(help));
}

void OptionParser::value(std::vector<std::string> names, float* out, std::string metavar, std::string help) {
  custom(std::move(names), [out](const std::string& v) {
    errno = 0;
    char* end = nullptr;
    const float f = std::strtof(v.c_str(), &end);
    if (v.empty() || *end != '\0' || errno == ERANGE) return "'" + v + "' is not a number";
    *out = f;
    return std::string();
  }, std::move(metavar), std::move(help));
}

void OptionParser::custom(std::vector<std::string> names, std::function<std::string(const std::string&)> apply,
                          std::string metavar, std::string help) {
  options_.push_back({std::move(names), std::move(metavar), std::move(help), std::move(apply)});
}

void OptionParser::positional(std::vector<std::string>* out, std::string metavar) {
  positional_ = out;
  positional_metavar_ = std::move(metavar);
}

std::optional<int> OptionParser::parse(int argc, char** argv) {
  for (int i = 0; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "-h" || arg == "--help") {
      print_help();
      return 0;
    }
    const Option* found = nullptr;
    for (const auto& o : options_) {
      for (const auto& n : o.names) {
        if (n == arg) found = &o;
      }
    }
    if (found == nullptr) {
      if (positional_ != nullptr && (arg.empty() || arg[0] != '-' || arg == "-")) {
        positional_->push_back(arg);
        continue;
      }
      std::fprintf(stderr, "kiln %s: unknown option '%s' (see kiln %s --help)\n", command_.c_str(), arg.c_str(),
                   command_.c_str());
      return 2;
    }
    std::string v;
    if (!found->metavar.empty()) {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "kiln %s: %s needs a value (%s)\n", command_.c_str(), arg.c_str(), found->metavar.c_str());
        return 2;
      }
      v = argv[++i];
    }
    const std::string err = found->apply(v);
    if (!err.empty()) {
      std::fprintf(stderr, "kiln %s: %s: %s\n", command_.c_str(), arg.c_str(), err.c_str());
      return 2;
    }
  }
  return std::nullopt;
}

void OptionParser::print_help() const {
  std::printf("usage: %s\n\noptions:\n", usage_.c_str());
  for (const auto& o : options_) {
    std::string names;
    for (const auto& n : o.names) names += (names.empty() ? "" : ", ") + n;
    if (!o.metavar.empty()) names += " " + o.metavar;
    std::printf("  %-30s %s\n", names.c_str(), o.help.c_str());
  }
}

}  // namespace kiln::cli
