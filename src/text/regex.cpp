#include "text/regex.h"

#include <algorithm>
#include <utility>

#include "text/unicode.h"

namespace kiln::text {

namespace {

using Range = std::pair<uint32_t, uint32_t>;

enum ClassEscape : uint8_t {
  kSpace = 1,
  kNotSpace = 2,
  kDigit = 4,
  kNotDigit = 8,
  kWord = 16,
  kNotWord = 32,
};

// ASCII classes, as std::regex's traits answer them in the C locale.
bool is_space(uint32_t c) { return c == ' ' || (c >= 0x09 && c <= 0x0D); }
bool is_digit(uint32_t c) { return c >= '0' && c <= '9'; }
bool is_word(uint32_t c) {
  return is_digit(c) || (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '_';
}

// \p{..} as llama.cpp rewrites it for collapsed text: the collapsed symbol plus the ASCII members.
bool category_ranges(std::string_view name, std::vector<Range>& out) {
  if (name == "N") {
    out.insert(out.end(), {{kCollapsedNumber, kCollapsedNumber}, {'0', '9'}});
  } else if (name == "L" || name == "Lu" || name == "Ll" || name == "Lt" || name == "Lm" || name == "Lo") {
    out.insert(out.end(), {{kCollapsedLetter, kCollapsedLetter}, {'A', 'Z'}, {'a', 'z'}});
  } else if (name == "P") {
    out.insert(out.end(), {{kCollapsedPunctuation, kCollapsedPunctuation},
                           {0x21, 0x23},
                           {0x25, 0x2A},
                           {0x2C, 0x2F},
                           {0x3A, 0x3B},
                           {0x3F, 0x40},
                           {0x5B, 0x5D},
                           {0x5F, 0x5F},
                           {0x7B, 0x7B},
                           {0x7D, 0x7D}});
  } else if (name == "M") {
    out.push_back({kCollapsedAccentMark, kCollapsedAccentMark});
  } else if (name == "S") {
    // ref: llama.cpp k_ucat_map: `$+<=>^`|~`. (Some llama.cpp versions leave out '~'; the build
    // behind tests/text/data includes it, as Unicode does.)
    out.insert(out.end(), {{kCollapsedSymbol, kCollapsedSymbol},
                           {0x24, 0x24},
                           {0x2B, 0x2B},
                           {0x3C, 0x3E},
                           {0x5E, 0x5E},
                           {0x60, 0x60},
                           {0x7C, 0x7C},
                           {0x7E, 0x7E}});
  } else {
    return false;
  }
  return true;
}

}  // namespace

struct Regex::Node {
  enum Kind {
    kChar,
    kClass,
    kAny,
    kSeq,
    kAlt,
    kRepeat,
    kLookahead,
    kBol,
    kEol,
    kWordBoundary,
    kNotWordBoundary
  };
  Kind kind = kSeq;
  uint32_t ch = 0;                          // kChar
  std::vector<Range> ranges;                // kClass
  uint8_t escapes = 0;                      // kClass: ClassEscape bits
  bool negated = false;                     // kClass; kLookahead: (?!...)
  std::vector<std::unique_ptr<Node>> kids;  // kSeq, kAlt; kRepeat and kLookahead: one
  int min = 0, max = -1;                    // kRepeat; max -1: unbounded
  bool greedy = true;                       // kRepeat

  bool single() const { return kind == kChar || kind == kClass || kind == kAny; }
  bool matches(uint32_t c) const {
    switch (kind) {
      case kChar:
        return c == ch;
      case kAny:
        return c != '\n' && c != '\r' && c != 0x2028 && c != 0x2029;
      case kClass: {
        bool in = false;
        for (const auto& [lo, hi] : ranges) in = in || (c >= lo && c <= hi);
        in = in || ((escapes & kSpace) && is_space(c)) || ((escapes & kNotSpace) && !is_space(c)) ||
             ((escapes & kDigit) && is_digit(c)) || ((escapes & kNotDigit) && !is_digit(c)) ||
             ((escapes & kWord) && is_word(c)) || ((escapes & kNotWord) && !is_word(c));
        return in != negated;
      }
      default:
        return false;
    }
  }
};

namespace {

using Node = Regex::Node;

class Parser {
 public:
  explicit Parser(std::string_view pattern) : pattern_(pattern), p_(decode_utf8(pattern)) {}

  Result<std::unique_ptr<Node>> parse(bool& uses_categories) {
    auto root = parse_alt();
    if (!error_.empty()) return make_error("regex: ", error_, " at ", pos_, " in '", pattern_, "'");
    if (pos_ != p_.size()) return make_error("regex: unbalanced ')' at ", pos_, " in '", pattern_, "'");
    uses_categories = uses_categories_;
    return root;
  }

 private:
  bool at_end() const { return pos_ >= p_.size(); }
  uint32_t peek(size_t ahead = 0) const { return pos_ + ahead < p_.size() ? p_[pos_ + ahead] : 0; }
  void fail(std::string msg) {
    if (error_.empty()) error_ = std::move(msg);
    pos_ = p_.size();
  }

  std::unique_ptr<Node> make(Node::Kind kind) {
    auto n = std::make_unique<Node>();
    n->kind = kind;
    return n;
  }

  std::unique_ptr<Node> parse_alt() {
    auto alt = make(Node::kAlt);
    alt->kids.push_back(parse_seq());
    while (!at_end() && peek() == '|') {
      ++pos_;
      alt->kids.push_back(parse_seq());
    }
    if (alt->kids.size() == 1) return std::move(alt->kids[0]);
    return alt;
  }

  std::unique_ptr<Node> parse_seq() {
    auto seq = make(Node::kSeq);
    while (!at_end() && peek() != '|' && peek() != ')') {
      auto atom = parse_atom();
      if (!atom) return seq;
      seq->kids.push_back(parse_quantifier(std::move(atom)));
    }
    return seq;
  }

  bool parse_int(int& v) {
    if (at_end() || !is_digit(peek())) return false;
    v = 0;
    while (!at_end() && is_digit(peek())) {
      v = v * 10 + static_cast<int>(peek() - '0');
      if (v > 100000) return false;
      ++pos_;
    }
    return true;
  }

  std::unique_ptr<Node> parse_quantifier(std::unique_ptr<Node> atom) {
    while (!at_end()) {
      int min = 0, max = -1;
      const uint32_t c = peek();
      if (c == '*') {
        ++pos_;
      } else if (c == '+') {
        min = 1;
        ++pos_;
      } else if (c == '?') {
        max = 1;
        ++pos_;
      } else if (c == '{') {
        ++pos_;
        if (!parse_int(min)) {
          fail("bad quantifier");
          return atom;
        }
        max = min;
        if (peek() == ',') {
          ++pos_;
          max = -1;
          if (peek() != '}' && !parse_int(max)) {
            fail("bad quantifier");
            return atom;
          }
        }
        if (peek() != '}' || (max >= 0 && max < min)) {
          fail("bad quantifier");
          return atom;
        }
        ++pos_;
      } else {
        return atom;
      }
      if (atom->kind == Node::kBol || atom->kind == Node::kEol || atom->kind == Node::kLookahead) {
        fail("quantifier after an assertion");
        return atom;
      }
      auto rep = make(Node::kRepeat);
      rep->min = min;
      rep->max = max;
      if (peek() == '?') {
        rep->greedy = false;
        ++pos_;
      }
      rep->kids.push_back(std::move(atom));
      atom = std::move(rep);
    }
    return atom;
  }

  // Reads the hex digits of \xHH or \uHHHH.
  bool parse_hex(int digits, uint32_t& v) {
    v = 0;
    for (int i = 0; i < digits; ++i) {
      const uint32_t c = peek();
      int d = is_digit(c)              ? int(c - '0')
              : (c >= 'a' && c <= 'f') ? int(c - 'a' + 10)
              : (c >= 'A' && c <= 'F') ? int(c - 'A' + 10)
                                       : -1;
      if (d < 0) return false;
      v = v * 16 + static_cast<uint32_t>(d);
      ++pos_;
    }
    return true;
  }

  // After the backslash: a control escape or identity escape as one codepoint; false when the
  // escape is not a single character (classes, assertions, \p).
  bool parse_char_escape(uint32_t& out) {
    const uint32_t c = peek();
    switch (c) {
      case 'r':
        out = '\r';
        break;
      case 'n':
        out = '\n';
        break;
      case 't':
        out = '\t';
        break;
      case 'f':
        out = '\f';
        break;
      case 'v':
        out = '\v';
        break;
      case '0':
        out = 0;
        break;
      case 'x':
        ++pos_;
        if (!parse_hex(2, out)) fail("bad \\x escape");
        return true;
      case 'u':
        ++pos_;
        if (!parse_hex(4, out)) fail("bad \\u escape");
        return true;
      case 's':
      case 'S':
      case 'd':
      case 'D':
      case 'w':
      case 'W':
      case 'b':
      case 'B':
      case 'p':
        return false;
      default:
        if (is_word(c)) {
          fail("unknown escape");
          return true;
        }
        out = c;
    }
    ++pos_;
    return true;
  }

  uint8_t class_escape(uint32_t c) {
    switch (c) {
      case 's':
        return kSpace;
      case 'S':
        return kNotSpace;
      case 'd':
        return kDigit;
      case 'D':
        return kNotDigit;
      case 'w':
        return kWord;
      case 'W':
        return kNotWord;
      default:
        return 0;
    }
  }

  // After "\p": reads "{Name}" into ranges.
  bool parse_category(std::vector<Range>& ranges) {
    ++pos_;  // 'p'
    if (peek() != '{') {
      fail("bad \\p escape");
      return false;
    }
    std::string name;
    ++pos_;
    while (!at_end() && peek() != '}' && name.size() < 16)
      name.push_back(static_cast<char>(peek() & 0x7F)), ++pos_;
    if (peek() != '}' || !category_ranges(name, ranges)) {
      fail("unsupported category \\p{" + name + "}");
      return false;
    }
    ++pos_;
    uses_categories_ = true;
    return true;
  }

  std::unique_ptr<Node> parse_class() {
    auto cls = make(Node::kClass);
    ++pos_;  // '['
    if (peek() == '^') {
      cls->negated = true;
      ++pos_;
    }
    bool first = true;
    while (true) {
      if (at_end()) {
        fail("unterminated class");
        return nullptr;
      }
      uint32_t c = peek();
      if (c == ']' && !first) {
        ++pos_;
        return cls;
      }
      first = false;
      uint32_t lo = c;
      if (c == '\\') {
        ++pos_;
        const uint32_t e = peek();
        if (uint8_t bits = class_escape(e)) {
          cls->escapes |= bits;
          ++pos_;
          continue;
        }
        if (e == 'p') {
          if (!parse_category(cls->ranges)) return nullptr;
          continue;
        }
        if (e == 'b') {
          lo = 0x08;
          ++pos_;
        } else if (e == 'B') {
          fail("\\B in a class");
          return nullptr;
        } else if (!parse_char_escape(lo)) {
          return nullptr;
        }
      } else {
        ++pos_;
      }
      uint32_t hi = lo;
      if (peek() == '-' && peek(1) != ']' && pos_ + 1 < p_.size()) {
        ++pos_;
        hi = peek();
        if (hi == '\\') {
          ++pos_;
          if (!parse_char_escape(hi)) {
            fail("bad range end");
            return nullptr;
          }
        } else {
          ++pos_;
        }
        if (hi < lo) {
          fail("range out of order");
          return nullptr;
        }
      }
      cls->ranges.push_back({lo, hi});
    }
  }

  std::unique_ptr<Node> parse_atom() {
    const uint32_t c = peek();
    switch (c) {
      case '(': {
        ++pos_;
        bool lookahead = false, negative = false;
        if (peek() == '?') {
          if (peek(1) == ':') {
            pos_ += 2;
          } else if (peek(1) == '=' || peek(1) == '!') {
            lookahead = true;
            negative = peek(1) == '!';
            pos_ += 2;
          } else {
            fail("unsupported group");
            return nullptr;
          }
        }
        auto inner = parse_alt();
        if (peek() != ')') {
          fail("missing ')'");
          return nullptr;
        }
        ++pos_;
        if (!lookahead) return inner;
        auto la = make(Node::kLookahead);
        la->negated = negative;
        la->kids.push_back(std::move(inner));
        return la;
      }
      case '[':
        return parse_class();
      case '.':
        ++pos_;
        return make(Node::kAny);
      case '^':
        ++pos_;
        return make(Node::kBol);
      case '$':
        ++pos_;
        return make(Node::kEol);
      case '*':
      case '+':
      case '?':
      case '{':
        fail("nothing to repeat");
        return nullptr;
      case '\\': {
        ++pos_;
        const uint32_t e = peek();
        if (uint8_t bits = class_escape(e)) {
          ++pos_;
          auto cls = make(Node::kClass);
          cls->escapes = bits;
          return cls;
        }
        if (e == 'b' || e == 'B') {
          ++pos_;
          return make(e == 'b' ? Node::kWordBoundary : Node::kNotWordBoundary);
        }
        if (e == 'p') {
          auto cls = make(Node::kClass);
          if (!parse_category(cls->ranges)) return nullptr;
          return cls;
        }
        uint32_t ch = 0;
        parse_char_escape(ch);
        auto n = make(Node::kChar);
        n->ch = ch;
        return n;
      }
      default: {
        ++pos_;
        auto n = make(Node::kChar);
        n->ch = c;
        return n;
      }
    }
  }

  std::string_view pattern_;
  std::vector<uint32_t> p_;
  size_t pos_ = 0;
  bool uses_categories_ = false;
  std::string error_;
};

// A non-owning callable `bool(size_t end)`: the rest of the match after a node.
class Cont {
 public:
  template <class F>
  Cont(const F& f) : obj_(&f), fn_([](const void* o, size_t j) { return (*static_cast<const F*>(o))(j); }) {}
  bool operator()(size_t j) const { return fn_(obj_, j); }

 private:
  const void* obj_;
  bool (*fn_)(const void*, size_t);
};

class Matcher {
 public:
  explicit Matcher(std::span<const uint32_t> text) : t_(text) {}

  bool match(const Node* n, size_t i, Cont k) const {
    switch (n->kind) {
      case Node::kChar:
      case Node::kClass:
      case Node::kAny:
        return i < t_.size() && n->matches(t_[i]) && k(i + 1);
      case Node::kSeq:
        return seq(n, 0, i, k);
      case Node::kAlt:
        for (const auto& alt : n->kids) {
          if (match(alt.get(), i, k)) return true;
        }
        return false;
      case Node::kRepeat:
        if (n->kids[0]->single()) return repeat_single(n, i, k);
        return repeat(n, 0, i, k);
      case Node::kLookahead: {
        const bool found = match(n->kids[0].get(), i, Cont([](size_t) { return true; }));
        return found != n->negated && k(i);
      }
      case Node::kBol:
        return i == 0 && k(i);
      case Node::kEol:
        return i == t_.size() && k(i);
      case Node::kWordBoundary:
      case Node::kNotWordBoundary: {
        const bool before = i > 0 && is_word(t_[i - 1]);
        const bool after = i < t_.size() && is_word(t_[i]);
        return ((before != after) == (n->kind == Node::kWordBoundary)) && k(i);
      }
    }
    return false;
  }

 private:
  bool seq(const Node* n, size_t idx, size_t i, Cont k) const {
    if (idx == n->kids.size()) return k(i);
    return match(n->kids[idx].get(), i, Cont([&](size_t j) { return seq(n, idx + 1, j, k); }));
  }

  // One-symbol atoms repeat without recursion: measure the run, then give back.
  bool repeat_single(const Node* n, size_t i, Cont k) const {
    const Node* atom = n->kids[0].get();
    const size_t limit = n->max < 0 ? t_.size() - i : std::min<size_t>(t_.size() - i, size_t(n->max));
    size_t run = 0;
    while (run < limit && atom->matches(t_[i + run])) ++run;
    if (run < size_t(n->min)) return false;
    if (n->greedy) {
      for (size_t c = run + 1; c-- > size_t(n->min);) {
        if (k(i + c)) return true;
      }
      return false;
    }
    for (size_t c = n->min; c <= run; ++c) {
      if (k(i + c)) return true;
    }
    return false;
  }

  bool repeat(const Node* n, int count, size_t i, Cont k) const {
    const bool can_more = n->max < 0 || count < n->max;
    const auto more = [&]() {
      return can_more && match(n->kids[0].get(), i, Cont([&](size_t j) {
                                 // an empty iteration past the minimum ends the loop (ECMAScript's rule)
                                 if (j == i && count >= n->min) return false;
                                 return repeat(n, count + 1, j, k);
                               }));
    };
    if (count < n->min) return more();
    if (n->greedy) return more() || k(i);
    return k(i) || more();
  }

  std::span<const uint32_t> t_;
};

}  // namespace

Result<Regex> Regex::compile(std::string_view pattern) {
  Parser parser(pattern);
  Regex re;
  KILN_ASSIGN_OR_RETURN(std::unique_ptr<Node> root, parser.parse(re.uses_categories_));
  re.root_ = std::move(root);
  return re;
}

std::optional<RegexMatch> Regex::search(std::span<const uint32_t> text, size_t from,
                                        bool not_empty_at_from) const {
  Matcher m(text);
  for (size_t s = from; s <= text.size(); ++s) {
    size_t end = 0;
    const bool require_progress = not_empty_at_from && s == from;
    const bool found = m.match(root_.get(), s, Cont([&](size_t j) {
                                 if (require_progress && j == s) return false;
                                 end = j;
                                 return true;
                               }));
    if (found) return RegexMatch{s, end};
  }
  return std::nullopt;
}

}  // namespace kiln::text
