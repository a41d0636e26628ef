// OptionParser: the command line of one `kiln` subcommand, declared once (names, value kind, the
// values that make sense, help) and parsed with one error format. Every value is checked here,
// at parse time, against the range declared with its option; a value outside it is refused with
// one line naming the flag and the value (`kiln run: -c: '-5' must be at least 0`), exit code 2.
//   OptionParser p("run", "kiln run [-m MODEL.gguf] -p PROMPT [options]");
//   p.value({"-n", "--n-predict"}, &n_predict, "N", "tokens to generate (-1: until end of text)",
//           IntRange::at_least(-1));
//   if (auto exit_code = p.parse(argc, argv)) return *exit_code;
// `-h`/`--help` prints the help: usage, description, arguments, options, notes, in that order,
// the same layout for every command.
#pragma once

#include <cstdint>
#include <functional>
#include <limits>
#include <optional>
#include <string>
#include <vector>

namespace kiln::cli {

// Integers in [min, max], plus `also` when set (a special value outside, e.g. -1: all).
//   IntRange::at_least(0), IntRange::between(0, 65535), IntRange::at_least(1).or_also(-1)
struct IntRange {
  int64_t min = std::numeric_limits<int64_t>::min();
  int64_t max = std::numeric_limits<int64_t>::max();
  std::optional<int64_t> also;

  static IntRange at_least(int64_t min) { return between(min, std::numeric_limits<int64_t>::max()); }
  static IntRange at_most(int64_t max) { return between(std::numeric_limits<int64_t>::min(), max); }
  static IntRange between(int64_t min, int64_t max) {
    IntRange r;
    r.min = min;
    r.max = max;
    return r;
  }
  IntRange or_also(int64_t value) const {
    IntRange r = *this;
    r.also = value;
    return r;
  }
};

// Finite numbers in [min, max] ((min, max] when min_exclusive). NaN and infinities are refused.
struct FloatRange {
  double min = -std::numeric_limits<double>::infinity();
  double max = std::numeric_limits<double>::infinity();
  bool min_exclusive = false;

  static FloatRange between(double min, double max) {
    FloatRange r;
    r.min = min;
    r.max = max;
    return r;
  }
  static FloatRange greater_than(double min) {
    FloatRange r;
    r.min = min;
    r.min_exclusive = true;
    return r;
  }
};

// Parses an integer option's value into `out`; the error message ("'x' is not an integer",
// "'-5' must be at least 0") or "". For custom() options that map numbers to meanings.
std::string parse_integer(const std::string& text, const IntRange& range, int64_t* out);

class OptionParser {
 public:
  OptionParser(std::string command, std::string usage);

  // A paragraph printed after the usage line, and one printed after the options (lists, limits).
  void description(std::string text);
  void notes(std::string text);

  void flag(std::vector<std::string> names, bool* out, std::string help);
  void value(std::vector<std::string> names, std::string* out, std::string metavar, std::string help);
  // Every occurrence appends its value (a repeatable option).
  void value(std::vector<std::string> names, std::vector<std::string>* out, std::string metavar,
             std::string help);
  void value(std::vector<std::string> names, int64_t* out, std::string metavar, std::string help,
             IntRange range = {});
  // As above; values beyond what an int32_t holds are refused too.
  void value(std::vector<std::string> names, int32_t* out, std::string metavar, std::string help,
             IntRange range = {});
  void value(std::vector<std::string> names, float* out, std::string metavar, std::string help,
             FloatRange range = {});
  // A file or folder name; an empty value is refused (it would read as "not given").
  void path(std::vector<std::string> names, std::string* out, std::string metavar, std::string help);
  // An option whose value a caller-supplied function interprets; it returns an error message
  // (printed after "FLAG: ") or "".
  void custom(std::vector<std::string> names, std::function<std::string(const std::string&)> apply,
              std::string metavar, std::string help);
  // A required argument that is not an option, in declaration order (e.g. a file name). A missing
  // one is named in the error: `kiln convert: missing OUT.gguf, the GGUF file to write`.
  void argument(std::string* out, std::string metavar, std::string help);

  // Parses argv; std::nullopt to go on, or the exit code to return now (0 after --help, 2 on a
  // usage error, which is printed to stderr).
  std::optional<int> parse(int argc, char** argv);
  void print_help() const;

 private:
  struct Option {
    std::vector<std::string> names;
    std::string metavar;  // empty for flags
    std::string help;
    std::function<std::string(const std::string&)> apply;  // flags receive ""
  };
  struct Argument {
    std::string* out;
    std::string metavar, help;
  };
  const Option* find(const std::string& name) const;

  std::string command_, usage_, description_, notes_;
  std::vector<Option> options_;
  std::vector<Argument> arguments_;
};

}  // namespace kiln::cli
