// OptionParser: the command-line options of one `kiln` subcommand, declared once (names, value
// kind, help) and parsed with clear errors. `-h`/`--help` prints the generated help.
//   OptionParser p("run", "kiln run [-m MODEL.gguf] -p PROMPT [options]");
//   p.value({"-n", "--n-predict"}, &n_predict, "N", "tokens to generate (-1: until end of text)");
//   if (auto exit_code = p.parse(argc, argv)) return *exit_code;
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace kiln::cli {

class OptionParser {
 public:
  OptionParser(std::string command, std::string usage);

  void flag(std::vector<std::string> names, bool* out, std::string help);
  void value(std::vector<std::string> names, std::string* out, std::string metavar, std::string help);
  void value(std::vector<std::string> names, int64_t* out, std::string metavar, std::string help);
  void value(std::vector<std::string> names, int32_t* out, std::string metavar, std::string help);
  void value(std::vector<std::string> names, float* out, std::string metavar, std::string help);
  // An option whose value a caller-supplied function interprets; it returns an error message or "".
  void custom(std::vector<std::string> names, std::function<std::string(const std::string&)> apply,
              std::string metavar, std::string help);
  // Arguments that are not options, in order (e.g. file names).
  void positional(std::vector<std::string>* out, std::string metavar);

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
  std::string command_, usage_;
  std::vector<Option> options_;
  std::vector<std::string>* positional_ = nullptr;
  std::string positional_metavar_;
};

}  // namespace kiln::cli
