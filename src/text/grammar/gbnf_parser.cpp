// The GBNF parser: llama.cpp's llama_grammar_parser rules (ref: src/llama-grammar.cpp), with
// errors that name the line and column instead of echoing the rest of the text, and limits
// checked before any expansion (a repetition whose maximum is below its minimum is refused).
#include <algorithm>
#include <map>
#include <optional>

#include "text/grammar/gbnf.h"
#include "text/grammar/utf8_decode.h"
#include "text/tokenizer.h"

namespace kiln::grammar {
namespace {

// llama.cpp's MAX_REPETITION_THRESHOLD: repetition counts and generated-rule products above it
// are refused (a maximum above it means "unbounded").
constexpr uint64_t kMaxRepetition = 2000;

// kiln's limits on what a grammar may expand to (past one, the grammar is refused with an error
// that names it). The text's length bounds what is written; these bound what it becomes: a
// repetition copies its item (`"<1 MB literal>"{2000}` would be two billion elements), and every
// group or repetition generates a rule named after its own (20,000 groups in a rule with a 1 KB
// name would be 20 MB of names).
constexpr uint64_t kMaxElements = uint64_t{1} << 22;    // all rules' elements, repetitions expanded
constexpr uint64_t kMaxRules = uint64_t{1} << 18;       // named and generated rules
constexpr uint64_t kMaxAlternatives = uint64_t{1} << 16;  // alternatives of one rule
constexpr uint64_t kMaxNameBytes = uint64_t{16} << 20;  // all rules' names

bool is_digit(char c) { return '0' <= c && c <= '9'; }
bool is_word_char(char c) { return ('a' <= c && c <= 'z') || ('A' <= c && c <= 'Z') || c == '-' || is_digit(c); }

using Rule = std::vector<Element>;

struct ParseError {
  size_t offset;
  std::string message;
};

class Parser {
 public:
  Parser(std::string_view text, const text::Tokenizer* tokenizer) : text_(text), tokenizer_(tokenizer) {}

  // Parses the whole text; a ParseError on failure.
  std::optional<ParseError> run() {
    try {
      size_t pos = parse_space(0, true);
      while (at(pos) != '\0') pos = parse_rule(pos);
    } catch (ParseError& e) {
      return e;
    }
    return std::nullopt;
  }

  std::map<std::string, uint32_t, std::less<>> symbol_ids;
  std::vector<Rule> rules;

 private:
  // The byte at `pos`, or '\0' at the end (llama.cpp reads a NUL-terminated string).
  char at(size_t pos) const { return pos < text_.size() ? text_[pos] : '\0'; }

  [[noreturn]] void fail(size_t pos, std::string message) const { throw ParseError{pos, std::move(message)}; }

  // The id of the rule `name`, a new one the first time (at `pos`: where the name is written).
  uint32_t symbol_id(size_t pos, std::string_view name) {
    auto it = symbol_ids.find(name);
    if (it != symbol_ids.end()) return it->second;
    const auto id = static_cast<uint32_t>(symbol_ids.size());
    count_rule(pos, name.size());
    symbol_ids.emplace(std::string(name), id);
    return id;
  }

  // A new rule generated at `pos` for a group or a repetition in rule `base`.
  uint32_t generate_symbol_id(size_t pos, const std::string& base) {
    const auto id = static_cast<uint32_t>(symbol_ids.size());
    std::string name = base + '_' + std::to_string(id);
    count_rule(pos, name.size());
    symbol_ids[std::move(name)] = id;
    return id;
  }

  void count_rule(size_t pos, size_t name_bytes) {
    if (symbol_ids.size() >= kMaxRules)
      fail(pos, "the grammar has more than " + std::to_string(kMaxRules) + " rules (kiln's limit)");
    name_bytes_ += name_bytes;
    if (name_bytes_ > kMaxNameBytes)
      fail(pos, "the grammar's rule names take more than " + std::to_string(kMaxNameBytes) + " bytes (kiln's limit)");
  }

  // Fails at `pos` unless the rules added so far and `more` elements stay within kMaxElements.
  void check_elements(size_t pos, uint64_t more) const {
    if (n_elements_ + more > kMaxElements) {
      fail(pos, "the grammar expands to more than " + std::to_string(kMaxElements) +
                    " elements (kiln's limit; repetitions copy what they repeat)");
    }
  }

  // Rule `id`, ended at `pos`.
  void add_rule(size_t pos, uint32_t id, Rule rule) {
    const auto alternatives = static_cast<uint64_t>(std::count_if(
        rule.begin(), rule.end(), [](const Element& e) { return is_end_of_sequence(e.type); }));
    if (alternatives > kMaxAlternatives) {
      fail(pos, "a rule has more than " + std::to_string(kMaxAlternatives) + " alternatives (kiln's limit)");
    }
    check_elements(pos, rule.size());
    n_elements_ += rule.size();
    if (rules.size() <= id) rules.resize(id + 1);
    rules[id] = std::move(rule);
  }

  size_t parse_space(size_t pos, bool newline_ok) const {
    while (true) {
      const char c = at(pos);
      if (c == ' ' || c == '\t' || (newline_ok && (c == '\r' || c == '\n'))) {
        ++pos;
      } else if (c == '#') {
        while (at(pos) != '\0' && at(pos) != '\r' && at(pos) != '\n') ++pos;
      } else {
        return pos;
      }
    }
  }

  size_t parse_name(size_t pos) const {
    const size_t begin = pos;
    while (is_word_char(at(pos))) ++pos;
    if (pos == begin) fail(begin, "expecting name");
    return pos;
  }

  // Digits at `pos` as a number (an error when there are none or they overflow).
  std::pair<uint64_t, size_t> parse_int(size_t pos) const {
    const size_t begin = pos;
    uint64_t value = 0;
    while (is_digit(at(pos))) {
      const uint64_t digit = static_cast<uint64_t>(at(pos) - '0');
      if (value > (UINT64_MAX - digit) / 10) fail(begin, "number too large");
      value = value * 10 + digit;
      ++pos;
    }
    if (pos == begin) fail(begin, "expecting integer");
    return {value, pos};
  }

  std::pair<uint32_t, size_t> parse_hex(size_t pos, int size) const {
    uint32_t value = 0;
    for (int i = 0; i < size; ++i) {
      const char c = at(pos + static_cast<size_t>(i));
      uint32_t digit;
      if ('a' <= c && c <= 'f') {
        digit = static_cast<uint32_t>(c - 'a' + 10);
      } else if ('A' <= c && c <= 'F') {
        digit = static_cast<uint32_t>(c - 'A' + 10);
      } else if (is_digit(c)) {
        digit = static_cast<uint32_t>(c - '0');
      } else {
        fail(pos, "expecting " + std::to_string(size) + " hex chars");
      }
      value = (value << 4) + digit;
    }
    return {value, pos + static_cast<size_t>(size)};
  }

  // One character of a literal or class: an escape or a UTF-8 sequence.
  std::pair<uint32_t, size_t> parse_char(size_t pos) const {
    if (at(pos) == '\\') {
      switch (at(pos + 1)) {
        case 'x': return parse_hex(pos + 2, 2);
        case 'u': return parse_hex(pos + 2, 4);
        case 'U': return parse_hex(pos + 2, 8);
        case 't': return {'\t', pos + 2};
        case 'r': return {'\r', pos + 2};
        case 'n': return {'\n', pos + 2};
        case '\\':
        case '"':
        case '[':
        case ']':
        case '-': return {static_cast<uint32_t>(at(pos + 1)), pos + 2};
        default: fail(pos, "unknown escape");
      }
    }
    if (at(pos) == '\0') fail(pos, "unexpected end of input");
    const auto [cp, len] = decode_utf8_char(text_.substr(pos));
    return {cp, pos + len};
  }

  // <[id]> or <text> (one token of the vocabulary, special tokens included).
  std::pair<uint32_t, size_t> parse_token(size_t pos) const {
    const size_t begin = pos;
    if (at(pos) != '<') fail(pos, "expecting '<'");
    ++pos;
    if (at(pos) == '[') {
      const auto [id, end] = parse_int(pos + 1);
      if (id > UINT32_MAX) fail(pos + 1, "token id too large");
      if (at(end) != ']') fail(end, "expecting ']'");
      if (at(end + 1) != '>') fail(end + 1, "expecting '>'");
      return {static_cast<uint32_t>(id), end + 2};
    }
    if (tokenizer_ == nullptr) fail(begin, "no vocabulary to resolve the token");
    while (at(pos) != '\0' && at(pos) != '>') ++pos;
    if (at(pos) != '>') fail(pos, "expecting '>'");
    ++pos;
    const std::string_view written = text_.substr(begin, pos - begin);
    const auto ids = tokenizer_->tokenize(written, false, true);
    if (ids.size() != 1) fail(begin, "'" + std::string(written) + "' is not one token of the vocabulary");
    return {static_cast<uint32_t>(ids[0]), pos};
  }

  // A rule being parsed: a named rule's alternatives, or a group's (a generated rule).
  struct Open {
    uint32_t rule_id;
    bool nested;                 // a group: newlines are spaces inside it
    size_t open = 0;             // a group's '('
    size_t n_rules_before = 0;   // a group's: symbol ids before its own
    Rule rule{};
    size_t last_sym_start = 0;   // where the current alternative's last item starts
    uint64_t n_prev_rules = 1;   // the rules that item expands to (repetition limits)
  };

  // The alternatives of rule `rule_id` and of the groups nested in them (ref:
  // llama_grammar_parser::parse_alternates, whose recursion per group is an explicit stack here:
  // nesting depth is the input's).
  size_t parse_alternates(size_t pos, const std::string& rule_name, uint32_t rule_id) {
    std::vector<Open> open;  // the rule, then the groups open in it, innermost last
    open.push_back({.rule_id = rule_id, .nested = false});
    while (true) {
      pos = parse_sequence(pos, rule_name, open.back());
      if (at(pos) == '(') {
        const size_t n_rules_before = symbol_ids.size();
        open.push_back({.rule_id = generate_symbol_id(pos, rule_name), .nested = true, .open = pos,
                        .n_rules_before = n_rules_before});
        pos = parse_space(pos + 1, true);
        continue;
      }
      if (at(pos) == '|') {
        Open& o = open.back();
        o.rule.push_back({ElementType::Alt, 0});
        o.last_sym_start = o.rule.size();
        o.n_prev_rules = 1;
        pos = parse_space(pos + 1, true);
        continue;
      }
      Open done = std::move(open.back());
      open.pop_back();
      done.rule.push_back({ElementType::End, 0});
      add_rule(pos, done.rule_id, std::move(done.rule));
      if (open.empty()) return pos;
      // The group is an item of the sequence it opened in.
      Open& o = open.back();
      o.n_prev_rules = std::max<uint64_t>(1, symbol_ids.size() - done.n_rules_before);
      o.last_sym_start = o.rule.size();
      o.rule.push_back({ElementType::RuleRef, done.rule_id});
      if (at(pos) != ')') fail(pos, "expecting ')' to close the '(' at " + location(done.open));
      pos = parse_space(pos + 1, o.nested);
    }
  }

  // The items of one alternative of `o`, up to its end or a group's '(' (parse_alternates parses
  // the group). ref: llama_grammar_parser::parse_sequence; repetitions are rewritten as
  //   S{m,n} -> S ... S (m times) S'(n-m), S'(x) ::= S S'(x-1) | , S'(1) ::= S |
  //   S{m,}  -> S ... S (m times) S',      S'    ::= S S' |
  size_t parse_sequence(size_t pos, const std::string& rule_name, Open& o) {
    Rule& rule = o.rule;
    size_t& last_sym_start = o.last_sym_start;
    uint64_t& n_prev_rules = o.n_prev_rules;
    const bool nested = o.nested;

    auto handle_repetitions = [&](size_t at_pos, uint64_t min_times, std::optional<uint64_t> max_times) {
      if (last_sym_start == rule.size()) fail(at_pos, "expecting an item before the repetition operator");
      if (max_times && *max_times < min_times) fail(at_pos, "repetition maximum is below its minimum");
      const Rule prev(rule.begin() + static_cast<std::ptrdiff_t>(last_sym_start), rule.end());
      uint64_t total_rules = 1;
      if (max_times && *max_times > 0) {
        total_rules = *max_times;
      } else if (min_times > 0) {
        total_rules = min_times;
      }
      if (n_prev_rules * total_rules > kMaxRepetition)
        fail(at_pos, "repetitions multiplied by the rules they repeat exceed " + std::to_string(kMaxRepetition));
      if (min_times == 0) {
        rule.resize(last_sym_start);
      } else {
        check_elements(at_pos, rule.size() + prev.size() * (min_times - 1));
        for (uint64_t i = 1; i < min_times; ++i) rule.insert(rule.end(), prev.begin(), prev.end());
      }
      uint32_t last_rec_rule_id = 0;
      const uint64_t n_opt = max_times ? *max_times - min_times : 1;
      Rule rec_rule(prev);
      for (uint64_t i = 0; i < n_opt; ++i) {
        rec_rule.resize(prev.size());
        const uint32_t rec_rule_id = generate_symbol_id(at_pos, rule_name);
        if (i > 0 || !max_times) rec_rule.push_back({ElementType::RuleRef, max_times ? last_rec_rule_id : rec_rule_id});
        rec_rule.push_back({ElementType::Alt, 0});
        rec_rule.push_back({ElementType::End, 0});
        add_rule(at_pos, rec_rule_id, rec_rule);
        last_rec_rule_id = rec_rule_id;
      }
      if (n_opt > 0) rule.push_back({ElementType::RuleRef, last_rec_rule_id});
      n_prev_rules *= total_rules;
    };

    while (at(pos) != '\0') {
      const char c = at(pos);
      if (c == '"') {  // literal string
        ++pos;
        last_sym_start = rule.size();
        n_prev_rules = 1;
        while (at(pos) != '"') {
          if (at(pos) == '\0') fail(pos, "unexpected end of input in a string literal");
          const auto [cp, next] = parse_char(pos);
          rule.push_back({ElementType::Char, cp});
          pos = next;
        }
        pos = parse_space(pos + 1, nested);
      } else if (c == '[') {  // character class
        ++pos;
        ElementType start_type = ElementType::Char;
        if (at(pos) == '^') {
          ++pos;
          start_type = ElementType::CharNot;
        }
        last_sym_start = rule.size();
        n_prev_rules = 1;
        while (at(pos) != ']') {
          if (at(pos) == '\0') fail(pos, "unexpected end of input in a character class");
          const auto [cp, next] = parse_char(pos);
          pos = next;
          rule.push_back({last_sym_start < rule.size() ? ElementType::CharAlt : start_type, cp});
          if (at(pos) == '-' && at(pos + 1) != ']') {
            if (at(pos + 1) == '\0') fail(pos + 1, "unexpected end of input in a character class");
            const auto [upper, after] = parse_char(pos + 1);
            pos = after;
            rule.push_back({ElementType::CharRangeUpper, upper});
          }
        }
        pos = parse_space(pos + 1, nested);
      } else if (c == '<' || c == '!') {  // token
        ElementType type = ElementType::Token;
        if (c == '!') {
          type = ElementType::TokenNot;
          ++pos;
        }
        const auto [id, end] = parse_token(pos);
        last_sym_start = rule.size();
        n_prev_rules = 1;
        rule.push_back({type, id});
        pos = parse_space(end, nested);
      } else if (is_word_char(c)) {  // rule reference
        const size_t name_end = parse_name(pos);
        const uint32_t ref = symbol_id(pos, text_.substr(pos, name_end - pos));
        pos = parse_space(name_end, nested);
        last_sym_start = rule.size();
        n_prev_rules = 1;
        rule.push_back({ElementType::RuleRef, ref});
      } else if (c == '.') {
        last_sym_start = rule.size();
        n_prev_rules = 1;
        rule.push_back({ElementType::CharAny, 0});
        pos = parse_space(pos + 1, nested);
      } else if (c == '*' || c == '+' || c == '?') {
        const size_t op = pos;
        pos = parse_space(pos + 1, nested);
        if (c == '*') handle_repetitions(op, 0, std::nullopt);
        if (c == '+') handle_repetitions(op, 1, std::nullopt);
        if (c == '?') handle_repetitions(op, 0, 1);
      } else if (c == '{') {
        const size_t op = pos;
        pos = parse_space(pos + 1, nested);
        if (!is_digit(at(pos))) fail(pos, "expecting an integer");
        auto [min_times, int_end] = parse_int(pos);
        pos = parse_space(int_end, nested);
        std::optional<uint64_t> max_times;  // nullopt: no maximum
        if (at(pos) == '}') {
          max_times = min_times;
          pos = parse_space(pos + 1, nested);
        } else if (at(pos) == ',') {
          pos = parse_space(pos + 1, nested);
          if (is_digit(at(pos))) {
            const auto [max_value, max_end] = parse_int(pos);
            max_times = max_value;
            pos = parse_space(max_end, nested);
          }
          if (at(pos) != '}') fail(pos, "expecting '}'");
          pos = parse_space(pos + 1, nested);
        } else {
          fail(pos, "expecting ',' or '}'");
        }
        if (min_times > kMaxRepetition)
          fail(op, "repetition count " + std::to_string(min_times) + " exceeds " + std::to_string(kMaxRepetition));
        if (max_times && *max_times > kMaxRepetition) max_times.reset();  // llama.cpp: unbounded
        handle_repetitions(op, min_times, max_times);
      } else {
        break;
      }
    }
    return pos;
  }

  size_t parse_rule(size_t pos) {
    const size_t name_end = parse_name(pos);
    const std::string name(text_.substr(pos, name_end - pos));
    const uint32_t rule_id = symbol_id(pos, name);
    pos = parse_space(name_end, false);
    if (!(at(pos) == ':' && at(pos + 1) == ':' && at(pos + 2) == '=')) fail(pos, "expecting ::=");
    pos = parse_space(pos + 3, true);
    pos = parse_alternates(pos, name, rule_id);
    if (at(pos) == '\r') {
      pos += at(pos + 1) == '\n' ? 2 : 1;
    } else if (at(pos) == '\n') {
      ++pos;
    } else if (at(pos) != '\0') {
      fail(pos, std::string("unexpected '") + at(pos) + "' (expecting the end of the rule)");
    }
    return parse_space(pos, true);
  }

 public:
  std::string location(size_t offset) const {
    size_t line = 1, column = 1;
    for (size_t i = 0; i < offset && i < text_.size(); ++i) {
      if (text_[i] == '\n') {
        ++line;
        column = 1;
      } else {
        ++column;
      }
    }
    return "line " + std::to_string(line) + ", column " + std::to_string(column);
  }

 private:
  std::string_view text_;
  const text::Tokenizer* tokenizer_;
  uint64_t n_elements_ = 0;  // elements of the rules added so far
  uint64_t name_bytes_ = 0;  // bytes of the rules' names so far
};

// Whether one of the rule's alternatives is empty.
bool has_empty_alternative(const Rule& rule) {
  bool at_alternative_start = true;
  for (const Element& e : rule) {
    if (is_end_of_sequence(e.type)) {
      if (at_alternative_start) return true;
      at_alternative_start = true;
    } else {
      at_alternative_start = false;
    }
  }
  return false;
}

// Whether a rule reachable from `start` refers to itself before consuming anything (ref:
// llama_grammar_detect_left_recursion, the same walk with an explicit stack: chains of rules are
// as long as the input makes them). A rule already `visited` (explored without finding one) is
// not explored again: a left recursion through it would have been found then.
bool detect_left_recursion(const std::vector<Rule>& rules, uint32_t start, std::vector<bool>& visited,
                           std::vector<bool>& in_progress, std::vector<bool>& may_be_empty) {
  struct Frame {
    uint32_t rule;
    size_t next = 0;       // the next element to look at
    bool at_start = true;  // nothing consumed yet in the current alternative
  };
  std::vector<Frame> stack;
  auto enter = [&](uint32_t r) {
    in_progress[r] = true;
    may_be_empty[r] = has_empty_alternative(rules[r]);
    stack.push_back({.rule = r});
  };
  enter(start);
  while (!stack.empty()) {
    Frame& f = stack.back();
    const Rule& rule = rules[f.rule];
    if (f.next == rule.size()) {
      in_progress[f.rule] = false;
      visited[f.rule] = true;
      stack.pop_back();
      continue;
    }
    const Element& e = rule[f.next];
    if (e.type == ElementType::RuleRef && f.at_start) {
      if (in_progress[e.value]) return true;
      if (!visited[e.value]) {
        enter(e.value);  // this element is looked at again once the rule is explored
        continue;
      }
      if (!may_be_empty[e.value]) f.at_start = false;
    } else {
      f.at_start = is_end_of_sequence(e.type);
    }
    ++f.next;
  }
  return false;
}

}  // namespace

Result<Grammar> Grammar::parse(std::string_view text, const ParseOptions& options) {
  Parser parser(text, options.tokenizer);
  if (auto err = parser.run()) return make_error("grammar: ", parser.location(err->offset), ": ", err->message);

  std::vector<std::string> names(parser.rules.size());
  for (const auto& [name, id] : parser.symbol_ids) {
    if (id < names.size()) names[id] = name;
  }
  auto name_of = [&](uint32_t id) -> std::string {
    for (const auto& [name, sid] : parser.symbol_ids) {
      if (sid == id) return name;
    }
    return "#" + std::to_string(id);
  };
  if (parser.rules.empty()) return make_error("grammar: no rules");
  for (size_t i = 0; i < parser.rules.size(); ++i) {
    if (parser.rules[i].empty()) return make_error("grammar: undefined rule '", name_of(static_cast<uint32_t>(i)), "'");
    for (const Element& e : parser.rules[i]) {
      if (e.type == ElementType::RuleRef && (e.value >= parser.rules.size() || parser.rules[e.value].empty()))
        return make_error("grammar: undefined rule '", name_of(e.value), "' (used in '", names[i], "')");
    }
  }
  auto root = parser.symbol_ids.find(options.root);
  if (root == parser.symbol_ids.end()) return make_error("grammar: no '", options.root, "' rule");

  const size_t n = parser.rules.size();
  std::vector<bool> visited(n), in_progress(n), may_be_empty(n);
  for (size_t i = 0; i < n; ++i) {
    if (!visited[i] && detect_left_recursion(parser.rules, static_cast<uint32_t>(i), visited, in_progress, may_be_empty))
      return make_error("grammar: left recursion in rule '", names[i], "' (unsupported)");
  }

  Grammar g;
  g.root_ = root->second;
  g.rule_names_ = std::move(names);
  for (const Rule& rule : parser.rules) {
    g.rule_starts_.push_back(static_cast<uint32_t>(g.elements_.size()));
    g.elements_.insert(g.elements_.end(), rule.begin(), rule.end());
  }
  return g;
}

namespace {

void print_char(std::string& out, uint32_t c) {
  if (0x20 <= c && c <= 0x7f) {
    out += static_cast<char>(c);
  } else {
    char buf[16];
    std::snprintf(buf, sizeof(buf), "<U+%04X>", c);
    out += buf;
  }
}

}  // namespace

std::string Grammar::to_string() const {
  std::string out;
  for (uint32_t r = 0; r < n_rules(); ++r) {
    out += rule_names_[r] + " ::= ";
    for (uint32_t i = rule_starts_[r]; elements_[i].type != ElementType::End; ++i) {
      const Element& e = elements_[i];
      switch (e.type) {
        case ElementType::End: break;
        case ElementType::Alt: out += "| "; break;
        case ElementType::RuleRef: out += rule_names_[e.value] + " "; break;
        case ElementType::Char: out += "["; print_char(out, e.value); break;
        case ElementType::CharNot: out += "[^"; print_char(out, e.value); break;
        case ElementType::CharRangeUpper: out += "-"; print_char(out, e.value); break;
        case ElementType::CharAlt: print_char(out, e.value); break;
        case ElementType::CharAny: out += ". "; break;
        case ElementType::Token: out += "<[" + std::to_string(e.value) + "]> "; break;
        case ElementType::TokenNot: out += "!<[" + std::to_string(e.value) + "]> "; break;
      }
      const bool is_char = e.type == ElementType::Char || e.type == ElementType::CharNot ||
                           e.type == ElementType::CharAlt || e.type == ElementType::CharRangeUpper;
      if (is_char) {
        const ElementType next = elements_[i + 1].type;
        if (next != ElementType::CharAlt && next != ElementType::CharRangeUpper) out += "] ";
      }
    }
    out += "\n";
  }
  return out;
}

}  // namespace kiln::grammar
