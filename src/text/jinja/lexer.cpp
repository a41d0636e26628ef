#include "text/jinja/lexer.h"

#include <algorithm>

#include "text/jinja/utf8.h"

namespace kiln::jinja {

namespace {

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'; }
bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_word(char c) { return is_digit(c) || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }

// The source after the reference renderer's text rewrites, with the offset in the original
// source of every byte (for error locations).
struct Prepared {
  std::string text;
  std::vector<uint32_t> origin;
};

// Drops the whitespace before `{%`/`{#`/`{-` at line starts and the newline after `%}`/`#}`/`-}`.
Prepared strip_blocks(std::string_view src) {
  Prepared p;
  p.text.reserve(src.size());
  p.origin.reserve(src.size());
  size_t i = 0;
  bool line_start = true;
  while (i < src.size()) {
    if (line_start) {
      size_t j = i;
      while (j < src.size() && (src[j] == ' ' || src[j] == '\t')) ++j;
      if (j + 1 < src.size() && src[j] == '{' &&
          (src[j + 1] == '#' || src[j + 1] == '%' || src[j + 1] == '-'))
        i = j;
      line_start = false;
      continue;
    }
    const char c = src[i];
    p.text.push_back(c);
    p.origin.push_back(static_cast<uint32_t>(i));
    ++i;
    if (c == '}' && p.text.size() >= 2 && i < src.size() && src[i] == '\n') {
      const char before = p.text[p.text.size() - 2];
      if (before == '#' || before == '%' || before == '-') {
        ++i;  // trim_blocks: the newline goes
        line_start = true;
        continue;
      }
    }
    if (c == '\n' || c == '\r') line_start = true;
  }
  return p;
}

// Matches `{%-? *(end)?generation *-?%}` at i; returns its length (0 if none) and strip flags.
size_t match_generation_tag(std::string_view s, size_t i, bool& strip_before, bool& strip_after) {
  if (s.compare(i, 2, "{%") != 0) return 0;
  size_t j = i + 2;
  strip_before = j < s.size() && s[j] == '-';
  if (strip_before) ++j;
  while (j < s.size() && is_space(s[j])) ++j;
  if (s.compare(j, 3, "end") == 0) j += 3;
  if (s.compare(j, 10, "generation") != 0) return 0;
  j += 10;
  while (j < s.size() && is_space(s[j])) ++j;
  strip_after = j < s.size() && s[j] == '-';
  if (strip_after) ++j;
  if (s.compare(j, 2, "%}") != 0) return 0;
  return j + 2 - i;
}

// Removes generation tags (kept whitespace around them unless a `-` asks otherwise).
Prepared drop_generation_tags(Prepared in) {
  const std::string_view s = in.text;
  if (s.find("generation") == std::string_view::npos) return in;
  Prepared out;
  size_t i = 0;
  while (i < s.size()) {
    bool strip_before = false, strip_after = false;
    const size_t len = match_generation_tag(s, i, strip_before, strip_after);
    if (len == 0) {
      out.text.push_back(s[i]);
      out.origin.push_back(in.origin[i]);
      ++i;
      continue;
    }
    if (strip_before) {
      while (!out.text.empty() && is_space(out.text.back())) {
        out.text.pop_back();
        out.origin.pop_back();
      }
    }
    i += len;
    if (strip_after) {
      while (i < s.size() && is_space(s[i])) ++i;
    }
  }
  return out;
}

class Lexer {
 public:
  explicit Lexer(std::string_view source) : source_(source) {
    std::string_view src = source;
    if (!src.empty() && src.back() == '\n') src.remove_suffix(1);
    prepared_ = drop_generation_tags(strip_blocks(src));
    s_ = prepared_.text;
    line_starts_.push_back(0);
    for (size_t i = 0; i < source.size(); ++i) {
      if (source[i] == '\n') line_starts_.push_back(i + 1);
    }
  }

  std::vector<Token> run() {
    while (pos_ < s_.size()) {
      if (at_tag_start()) {
        lex_tag();
      } else {
        const size_t start = pos_;
        while (pos_ < s_.size() && !at_tag_start()) ++pos_;
        push(TokenKind::kText, std::string(s_.substr(start, pos_ - start)), start);
      }
    }
    tokens_.push_back(Token{TokenKind::kEnd, "", where(s_.size())});
    return std::move(tokens_);
  }

 private:
  Location where(size_t pos) const {
    const size_t off = pos < prepared_.origin.size() ? prepared_.origin[pos] : source_.size();
    const auto it = std::upper_bound(line_starts_.begin(), line_starts_.end(), off) - 1;
    return Location{static_cast<int>(it - line_starts_.begin()) + 1, static_cast<int>(off - *it) + 1};
  }

  bool at_tag_start() const {
    return pos_ + 1 < s_.size() && s_[pos_] == '{' &&
           (s_[pos_ + 1] == '{' || s_[pos_ + 1] == '%' || s_[pos_ + 1] == '#');
  }

  void push(TokenKind kind, std::string text, size_t at) {
    tokens_.push_back(Token{kind, std::move(text), where(at)});
  }

  // `{%-`, `{{-`, `{#-`: the text before loses its trailing whitespace.
  void strip_previous_text() {
    if (tokens_.empty() || tokens_.back().kind != TokenKind::kText) return;
    std::string& t = tokens_.back().text;
    while (!t.empty() && is_space(t.back())) t.pop_back();
    if (t.empty()) tokens_.pop_back();
  }

  void skip_space() {
    while (pos_ < s_.size() && is_space(s_[pos_])) ++pos_;
  }

  void lex_tag() {
    const size_t open = pos_;
    const char type = s_[pos_ + 1];
    pos_ += 2;
    const bool strip_before = pos_ < s_.size() && s_[pos_] == '-';
    if (strip_before) {
      ++pos_;
      strip_previous_text();
    }
    if (type == '#') return lex_comment(open);
    if (type == '%' && lex_raw(open)) return;
    push(type == '%' ? TokenKind::kOpenStmt : TokenKind::kOpenExpr, type == '%' ? "{%" : "{{", open);
    const std::string_view close = type == '%' ? "%}" : "}}";
    int curly_depth = 0;
    while (true) {
      skip_space();
      if (pos_ >= s_.size()) {
        fail_at(where(open), "unclosed '", type == '%' ? "{%" : "{{", "' (no matching '", close, "')");
      }
      const bool dash = s_[pos_] == '-' && s_.compare(pos_ + 1, 2, close) == 0;
      if (dash || (s_.compare(pos_, 2, close) == 0 && (type == '%' || curly_depth == 0))) {
        push(type == '%' ? TokenKind::kCloseStmt : TokenKind::kCloseExpr, std::string(close), pos_);
        pos_ += dash ? 3 : 2;
        if (dash) skip_space();
        return;
      }
      lex_token(curly_depth);
    }
  }

  void lex_comment(size_t open) {
    const size_t end = s_.find("#}", pos_);
    if (end == std::string_view::npos) fail_at(where(open), "unclosed comment (no matching '#}')");
    const bool strip_after = end > pos_ && s_[end - 1] == '-';
    pos_ = end + 2;
    if (strip_after) skip_space();
  }

  // `{% raw %}...{% endraw %}`: true if the tag at `open` is a raw block (then consumed whole).
  bool lex_raw(size_t open) {
    size_t j = pos_;
    while (j < s_.size() && is_space(s_[j])) ++j;
    if (s_.compare(j, 3, "raw") != 0 || (j + 3 < s_.size() && is_word(s_[j + 3]))) return false;
    j += 3;
    while (j < s_.size() && is_space(s_[j])) ++j;
    const bool strip_content_start = j < s_.size() && s_[j] == '-';
    if (strip_content_start) ++j;
    if (s_.compare(j, 2, "%}") != 0) return false;
    size_t body = j + 2;
    if (strip_content_start) {
      while (body < s_.size() && is_space(s_[body])) ++body;
    }
    // Find `{%-? *endraw *-?%}`.
    for (size_t k = s_.find("{%", body); k != std::string_view::npos; k = s_.find("{%", k + 2)) {
      size_t m = k + 2;
      const bool strip_content_end = m < s_.size() && s_[m] == '-';
      if (strip_content_end) ++m;
      while (m < s_.size() && is_space(s_[m])) ++m;
      if (s_.compare(m, 6, "endraw") != 0) continue;
      m += 6;
      while (m < s_.size() && is_space(s_[m])) ++m;
      const bool strip_after = m < s_.size() && s_[m] == '-';
      if (strip_after) ++m;
      if (s_.compare(m, 2, "%}") != 0) continue;
      std::string content(s_.substr(body, k - body));
      if (strip_content_end) {
        while (!content.empty() && is_space(content.back())) content.pop_back();
      }
      if (!content.empty()) push(TokenKind::kText, std::move(content), body);
      pos_ = m + 2;
      if (strip_after) skip_space();
      return true;
    }
    fail_at(where(open), "unclosed raw block (no matching '{% endraw %}')");
  }

  void lex_token(int& curly_depth) {
    const size_t start = pos_;
    const char c = s_[pos_];
    if (c == '\'' || c == '"') return lex_string(c);
    if (is_digit(c)) {
      while (pos_ < s_.size() && is_digit(s_[pos_])) ++pos_;
      const bool after_dot =
          !tokens_.empty() && tokens_.back().kind == TokenKind::kOp && tokens_.back().text == ".";
      if (!after_dot && pos_ + 1 < s_.size() && s_[pos_] == '.' && is_digit(s_[pos_ + 1])) {
        ++pos_;
        while (pos_ < s_.size() && is_digit(s_[pos_])) ++pos_;
        return push(TokenKind::kFloat, std::string(s_.substr(start, pos_ - start)), start);
      }
      return push(TokenKind::kInt, std::string(s_.substr(start, pos_ - start)), start);
    }
    if (is_word(c)) {
      while (pos_ < s_.size() && is_word(s_[pos_])) ++pos_;
      return push(TokenKind::kName, std::string(s_.substr(start, pos_ - start)), start);
    }
    static constexpr std::string_view kTwo[] = {"**", "//", "==", "!=", "<=", ">="};
    for (std::string_view op : kTwo) {
      if (s_.compare(pos_, 2, op) == 0) {
        pos_ += 2;
        return push(TokenKind::kOp, std::string(op), start);
      }
    }
    if (std::string_view("()[]{},.:|=<>+-~*/%").find(c) != std::string_view::npos) {
      if (c == '{') ++curly_depth;
      if (c == '}') --curly_depth;
      ++pos_;
      return push(TokenKind::kOp, std::string(1, c), start);
    }
    fail_at(where(start), "unexpected character '", c, "' in a tag");
  }

  void lex_string(char quote) {
    const size_t start = pos_++;
    std::string value;
    while (true) {
      if (pos_ >= s_.size()) fail_at(where(start), "unterminated string literal");
      const char c = s_[pos_++];
      if (c == quote) break;
      if (c != '\\') {
        value.push_back(c);
        continue;
      }
      if (pos_ >= s_.size()) fail_at(where(start), "unterminated string literal");
      const char e = s_[pos_++];
      switch (e) {
        case 'n':
          value += '\n';
          break;
        case 't':
          value += '\t';
          break;
        case 'r':
          value += '\r';
          break;
        case 'b':
          value += '\b';
          break;
        case 'f':
          value += '\f';
          break;
        case 'v':
          value += '\v';
          break;
        case '\'':
          value += '\'';
          break;
        case '"':
          value += '"';
          break;
        case '\\':
          value += '\\';
          break;
        case 'x':
        case 'u': {
          const size_t n = e == 'x' ? 2 : 4;
          uint32_t cp = 0;
          for (size_t k = 0; k < n; ++k) {
            const char h = pos_ + k < s_.size() ? s_[pos_ + k] : '\0';
            const int d = is_digit(h)              ? h - '0'
                          : (h >= 'a' && h <= 'f') ? h - 'a' + 10
                          : (h >= 'A' && h <= 'F') ? h - 'A' + 10
                                                   : -1;
            if (d < 0) fail_at(where(pos_ - 2), "invalid \\", e, " escape in a string literal");
            cp = cp * 16 + static_cast<uint32_t>(d);
          }
          pos_ += n;
          utf8_append(value, cp);
          break;
        }
        default:
          fail_at(where(pos_ - 2), "unknown escape '\\", e, "' in a string literal");
      }
    }
    push(TokenKind::kString, std::move(value), start);
  }

  std::string_view source_;
  Prepared prepared_;
  std::string_view s_;
  std::vector<size_t> line_starts_;
  size_t pos_ = 0;
  std::vector<Token> tokens_;
};

}  // namespace

std::vector<Token> tokenize(std::string_view source) { return Lexer(source).run(); }

}  // namespace kiln::jinja
