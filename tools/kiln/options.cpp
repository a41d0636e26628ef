#include "options.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "messages.h"

namespace kiln::cli {
namespace {

constexpr int64_t kInt64Min = std::numeric_limits<int64_t>::min();
constexpr int64_t kInt64Max = std::numeric_limits<int64_t>::max();

std::string number_text(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

// "must be at least 0", "must be in 1..65535", "must be -1 or at least 1", ...
std::string describe(const IntRange& r) {
  std::string bounds;
  if (r.min != kInt64Min && r.max != kInt64Max) {
    bounds = "in " + std::to_string(r.min) + ".." + std::to_string(r.max);
  } else if (r.min != kInt64Min) {
    bounds = "at least " + std::to_string(r.min);
  } else {
    bounds = "at most " + std::to_string(r.max);
  }
  return "must be " + (r.also ? std::to_string(*r.also) + " or " : std::string()) + bounds;
}

std::string describe(const FloatRange& r) {
  const bool has_min = std::isfinite(r.min), has_max = std::isfinite(r.max);
  if (has_min && has_max && !r.min_exclusive)
    return "must be in " + number_text(r.min) + ".." + number_text(r.max);
  std::string s = "must be";
  if (has_min) s += (r.min_exclusive ? " greater than " : " at least ") + number_text(r.min);
  if (has_min && has_max) s += " and";
  if (has_max) s += " at most " + number_text(r.max);
  return s;
}

}  // namespace

std::string parse_integer(const std::string& s, const IntRange& range, int64_t* out) {
  errno = 0;
  char* end = nullptr;
  const long long v = std::strtoll(s.c_str(), &end, 10);
  if (s.empty() || *end != '\0') return "'" + s + "' is not an integer";
  const bool inside = errno != ERANGE && v >= range.min && v <= range.max;
  if (!inside && !(errno != ERANGE && range.also && v == *range.also))
    return "'" + s + "' " + describe(range);
  *out = v;
  return "";
}

namespace {

std::string parse_float(const std::string& s, const FloatRange& range, float* out) {
  errno = 0;
  char* end = nullptr;
  const double v = std::strtod(s.c_str(), &end);
  if (s.empty() || *end != '\0') return "'" + s + "' is not a number";
  // Overflow (1e999), NaN and infinities, or beyond what a float holds.
  if (!std::isfinite(v) || std::fabs(v) > std::numeric_limits<float>::max())
    return "'" + s + "' is not a finite number";
  const bool below = range.min_exclusive ? v <= range.min : v < range.min;
  if (below || v > range.max) return "'" + s + "' " + describe(range);
  *out = static_cast<float>(v);
  return "";
}

}  // namespace

OptionParser::OptionParser(std::string command, std::string usage)
    : command_(std::move(command)), usage_(std::move(usage)) {}

void OptionParser::description(std::string text) { description_ = std::move(text); }
void OptionParser::notes(std::string text) { notes_ = std::move(text); }

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

void OptionParser::path(std::vector<std::string> names, std::string* out, std::string metavar, std::string help) {
  custom(std::move(names), [out](const std::string& v) {
    if (v.empty()) return std::string("needs a name, not an empty value");
    *out = v;
    return std::string();
  }, std::move(metavar), std::move(help));
}

void OptionParser::value(std::vector<std::string> names, std::vector<std::string>* out, std::string metavar,
                         std::string help) {
  custom(
      std::move(names),
      [out](const std::string& v) {
        out->push_back(v);
        return std::string();
      },
      std::move(metavar), std::move(help));
}

void OptionParser::value(std::vector<std::string> names, int64_t* out, std::string metavar, std::string help,
                         IntRange range) {
  custom(
      std::move(names), [out, range](const std::string& v) { return parse_integer(v, range, out); },
      std::move(metavar), std::move(help));
}

void OptionParser::value(std::vector<std::string> names, int32_t* out, std::string metavar, std::string help,
                         IntRange range) {
  custom(
      std::move(names),
      [out, range](const std::string& v) {
        int64_t wide = 0;
        if (std::string err = parse_integer(v, range, &wide); !err.empty()) return err;
        constexpr int64_t lo = std::numeric_limits<int32_t>::min(), hi = std::numeric_limits<int32_t>::max();
        if (wide < lo || wide > hi) return "'" + v + "' " + describe(IntRange::between(lo, hi));
        *out = static_cast<int32_t>(wide);
        return std::string();
      },
      std::move(metavar), std::move(help));
}

void OptionParser::value(std::vector<std::string> names, float* out, std::string metavar, std::string help,
                         FloatRange range) {
  custom(
      std::move(names), [out, range](const std::string& v) { return parse_float(v, range, out); },
      std::move(metavar), std::move(help));
}

void OptionParser::custom(std::vector<std::string> names, std::function<std::string(const std::string&)> apply,
                          std::string metavar, std::string help) {
  options_.push_back({std::move(names), std::move(metavar), std::move(help), std::move(apply)});
}

void OptionParser::argument(std::string* out, std::string metavar, std::string help) {
  arguments_.push_back({out, std::move(metavar), std::move(help)});
}

const OptionParser::Option* OptionParser::find(const std::string& name) const {
  for (const auto& o : options_) {
    if (std::find(o.names.begin(), o.names.end(), name) != o.names.end()) return &o;
  }
  return nullptr;
}

std::optional<int> OptionParser::parse(int argc, char** argv) {
  const std::string see_help = " (see kiln " + command_ + " --help)";
  size_t n_arguments = 0;
  for (int i = 0; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "-h" || arg == "--help") {
      print_help();
      return 0;
    }
    const Option* found = find(arg);
    if (found == nullptr) {
      if (arg.size() > 1 && arg[0] == '-')
        return fail(command_, "unknown option '" + arg + "'" + see_help, 2);
      if (n_arguments == arguments_.size())
        return fail(command_, "unexpected argument '" + arg + "'" + see_help, 2);
      *arguments_[n_arguments++].out = arg;
      continue;
    }
    std::string v;
    if (!found->metavar.empty()) {
      if (i + 1 >= argc) return fail(command_, arg + " needs a value (" + found->metavar + ")", 2);
      v = argv[++i];
    }
    if (const std::string err = found->apply(v); !err.empty()) return fail(command_, arg + ": " + err, 2);
  }
  if (n_arguments < arguments_.size()) {
    const Argument& missing = arguments_[n_arguments];
    return fail(command_, "missing " + missing.metavar + ", " + missing.help + see_help, 2);
  }
  return std::nullopt;
}

void OptionParser::print_help() const {
  std::string text = "usage: " + usage_ + "\n";
  if (!description_.empty()) text += "\n" + description_ + "\n";
  const auto row = [&text](const std::string& left, const std::string& help) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "  %-30s ", left.c_str());
    text += buf;
    if (left.size() > 30) text += "\n" + std::string(33, ' ');
    text += help + "\n";
  };
  if (!arguments_.empty()) {
    text += "\narguments:\n";
    for (const auto& a : arguments_) row(a.metavar, a.help);
  }
  text += "\noptions:\n";
  for (const auto& o : options_) {
    std::string names;
    for (const auto& n : o.names) names += (names.empty() ? "" : ", ") + n;
    if (!o.metavar.empty()) names += " " + o.metavar;
    row(names, o.help);
  }
  row("-h, --help", "print this help");
  if (!notes_.empty()) text += "\n" + notes_ + "\n";
  std::fputs(text.c_str(), stdout);
}

}  // namespace kiln::cli
