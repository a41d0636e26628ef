// A JSON schema `pattern` (an anchored regex) as GBNF: llama.cpp's _pattern_to_rule (ref:
// common/json-schema-to-grammar.cpp), same rules and names. Where llama.cpp falls back to "any
// string" for a pattern it cannot express (lookarounds, backreferences, \d, inner anchors), kiln
// refuses it: the output would not match.
#include <functional>
#include <limits>
#include <unordered_map>

#include "text/grammar/regex_to_gbnf.h"
#include "text/grammar/schema_rules.h"

namespace kiln::grammar {
namespace {

constexpr int kMaxPatternDepth = 100;

bool is_non_literal(char c) {
  switch (c) {
    case '|': case '.': case '(': case ')': case '[': case ']': case '{': case '}':
    case '*': case '+': case '?': case '^': case '$': return true;
    default: return false;
  }
}

// Characters a regex escapes that stand for themselves in a GBNF literal.
bool escaped_in_regex_only(char c) {
  switch (c) {
    case '^': case '$': case '.': case '[': case ']': case '(': case ')': case '|':
    case '{': case '}': case '*': case '+': case '?': return true;
    default: return false;
  }
}

// The length of a GBNF-compatible escape at `pos` (\n, \x41, \u00e9, ...), 0 if none.
size_t gbnf_escape_length(std::string_view pattern, size_t pos) {
  if (pos + 1 >= pattern.size() || pattern[pos] != '\\') return 0;
  size_t n_hex = 0;
  switch (pattern[pos + 1]) {
    case 'x': n_hex = 2; break;
    case 'u': n_hex = 4; break;
    case 'U': n_hex = 8; break;
    case 't': case 'r': case 'n': case '\\': case '"': case '[': case ']': case '-': return 2;
    default: return 0;
  }
  if (pos + 2 + n_hex > pattern.size()) return 0;
  for (size_t i = pos + 2; i < pos + 2 + n_hex; ++i) {
    const char h = pattern[i];
    if (!((h >= '0' && h <= '9') || (h >= 'a' && h <= 'f') || (h >= 'A' && h <= 'F'))) return 0;
  }
  return 2 + n_hex;
}

struct PatternError {
  std::string message;
};

class PatternConverter {
 public:
  PatternConverter(SchemaConverter& out, std::string_view sub, std::string name, bool dotall)
      : out_(out), sub_(sub), name_(std::move(name)), dotall_(dotall) {}

  std::string run() {
    std::string rule = to_rule(transform());
    if (depth_ != 0) throw PatternError{"unbalanced parentheses"};
    return rule;
  }

 private:
  using Item = std::pair<std::string, bool>;  // text, is a literal (unquoted)

  static std::string to_rule(const Item& item) { return item.second ? "\"" + item.first + "\"" : item.first; }

  Item join(const std::vector<Item>& seq) {
    std::vector<Item> merged;
    std::string literal;
    for (const Item& item : seq) {
      if (item.second) {
        literal += item.first;
      } else {
        if (!literal.empty()) merged.emplace_back(std::move(literal), true);
        literal.clear();
        merged.push_back(item);
      }
    }
    if (!literal.empty()) merged.emplace_back(std::move(literal), true);
    std::string text;
    for (size_t k = 0; k < merged.size(); ++k) {
      if (k > 0) text += " ";
      text += to_rule(merged[k]);
    }
    return {text, false};
  }

  Item transform() {
    std::vector<Item> seq;
    const size_t length = sub_.size();
    while (i_ < length) {
      const char c = sub_[i_];
      if (c == '.') {
        seq.emplace_back(out_.add_rule("dot", dotall_ ? "[\\U00000000-\\U0010FFFF]" : "[^\\x0A\\x0D]"), false);
        ++i_;
      } else if (c == '(') {
        ++i_;
        if (i_ < length && sub_[i_] == '?') {
          if (i_ + 1 < length && sub_[i_ + 1] == ':') {
            i_ += 2;  // a non-capturing group is a group
          } else {
            throw PatternError{"lookarounds, named groups and inline flags are not supported"};
          }
        }
        if (++depth_ > kMaxPatternDepth) throw PatternError{"groups nested too deep"};
        seq.emplace_back("(" + to_rule(transform()) + ")", false);
      } else if (c == ')') {
        ++i_;
        if (depth_ == 0) throw PatternError{"unbalanced parentheses"};
        --depth_;
        return join(seq);
      } else if (c == '^' || c == '$') {
        throw PatternError{"anchors inside the pattern are not supported"};
      } else if (c == '[') {
        std::string cls(1, c);
        ++i_;
        while (i_ < length && sub_[i_] != ']') {
          if (sub_[i_] == '\\') {
            const size_t n = gbnf_escape_length(sub_, i_);
            if (n == 0) throw PatternError{"the escape '" + std::string(sub_.substr(i_, 2)) + "' in a character class is not supported"};
            cls += sub_.substr(i_, n);
            i_ += n;
          } else {
            cls += sub_[i_++];
          }
        }
        if (i_ >= length) throw PatternError{"unterminated character class"};
        cls += ']';
        ++i_;
        seq.emplace_back(cls, false);
      } else if (c == '|') {
        seq.emplace_back("|", false);
        ++i_;
      } else if (c == '*' || c == '+' || c == '?') {
        if (seq.empty()) throw PatternError{"nothing to repeat"};
        seq.back() = {to_rule(seq.back()) + c, false};
        ++i_;
      } else if (c == '{') {
        std::string inner;
        ++i_;
        while (i_ < length && sub_[i_] != '}') inner += sub_[i_++];
        if (i_ >= length) throw PatternError{"unterminated {}"};
        ++i_;
        int min_times = 0, max_times = std::numeric_limits<int>::max();
        const size_t comma = inner.find(',');
        auto number = [](const std::string& s) {
          if (s.empty() || s.size() > 6 || s.find_first_not_of("0123456789") != std::string::npos)
            throw PatternError{"bad number '" + s + "' in {}"};
          return std::stoi(s);
        };
        if (comma == std::string::npos) {
          min_times = max_times = number(inner);
        } else {
          if (inner.find(',', comma + 1) != std::string::npos) throw PatternError{"too many numbers in {}"};
          if (comma > 0) min_times = number(inner.substr(0, comma));
          if (comma + 1 < inner.size()) max_times = number(inner.substr(comma + 1));
        }
        if (max_times < min_times) throw PatternError{"{" + inner + "}: the maximum is below the minimum"};
        if (seq.empty()) throw PatternError{"nothing to repeat"};
        Item& last = seq.back();
        if (!last.second) {
          std::string& id = sub_rule_ids_[last.first];
          if (id.empty()) id = out_.add_rule(name_ + "-" + std::to_string(sub_rule_ids_.size()), last.first);
          last.first = id;
        }
        last = {schema_rules::repetition(last.second ? "\"" + last.first + "\"" : last.first, min_times, max_times), false};
      } else {
        std::string literal;
        while (i_ < length) {
          if (sub_[i_] == '\\') {
            if (i_ == length - 1) throw PatternError{"trailing backslash"};
            const char next = sub_[i_ + 1];
            if (escaped_in_regex_only(next)) {
              literal += next;
              i_ += 2;
            } else {
              const size_t n = gbnf_escape_length(sub_, i_);
              if (n == 0) throw PatternError{"the escape '" + std::string(sub_.substr(i_, 2)) + "' is not supported"};
              literal += sub_.substr(i_, n);
              i_ += n;
            }
          } else if (sub_[i_] == '"') {
            literal += "\\\"";
            ++i_;
          } else if (!is_non_literal(sub_[i_]) &&
                     (i_ == length - 1 || literal.empty() || sub_[i_ + 1] == '.' || !is_non_literal(sub_[i_ + 1]))) {
            literal += sub_[i_++];
          } else {
            break;
          }
        }
        if (literal.empty()) throw PatternError{std::string("unexpected '") + c + "'"};
        seq.emplace_back(literal, true);
      }
    }
    return join(seq);
  }

  SchemaConverter& out_;
  std::string_view sub_;
  std::string name_;
  bool dotall_;
  size_t i_ = 0;
  int depth_ = 0;
  std::unordered_map<std::string, std::string> sub_rule_ids_;
};

}  // namespace

Result<std::string> pattern_to_gbnf(SchemaConverter& converter, std::string_view pattern, const std::string& name,
                                    bool dotall) {
  if (pattern.size() < 2 || pattern.front() != '^' || pattern.back() != '$')
    return make_error("pattern '", pattern, "' must be anchored with '^' and '$'");
  try {
    PatternConverter p(converter, pattern.substr(1, pattern.size() - 2), name, dotall);
    const std::string rule = p.run();
    return converter.add_rule(name, "\"\\\"\" (" + rule + ") \"\\\"\"");
  } catch (const PatternError& e) {
    return make_error("pattern '", pattern, "': ", e.message);
  }
}

}  // namespace kiln::grammar
