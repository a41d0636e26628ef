#include "text/chat/text_util.h"

#include <algorithm>
#include <cctype>
#include <vector>

namespace kiln::chat {
namespace {

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

}  // namespace

std::string_view trim_view(std::string_view s) {
  while (!s.empty() && is_space(s.front())) s.remove_prefix(1);
  while (!s.empty() && is_space(s.back())) s.remove_suffix(1);
  return s;
}

std::string trim(std::string_view s) { return std::string(trim_view(s)); }

DiffSplit diff_split(std::string_view left, std::string_view right) {
  size_t p = 0;
  while (p < left.size() && p < right.size() && left[p] == right[p]) ++p;
  size_t q = 0;
  while (q < left.size() - p && q < right.size() - p && left[left.size() - 1 - q] == right[right.size() - 1 - q]) ++q;
  return {std::string(left.substr(0, p)), std::string(left.substr(p, left.size() - p - q)),
          std::string(right.substr(p, right.size() - p - q)), std::string(left.substr(left.size() - q))};
}

JsonScan scan_json(std::string_view s) {
  using S = JsonScan::Status;
  // A stack of open containers: '{' expecting a key or '}', ':' after a key, ',' after a value...
  enum class Expect { Value, KeyOrClose, Key, Colon, CommaOrClose, ValueOrClose };
  std::vector<char> open;
  Expect expect = Expect::Value;
  size_t i = 0;
  auto after_value = [&]() -> bool {  // true when the top-level value is complete
    if (open.empty()) return true;
    expect = Expect::CommaOrClose;
    return false;
  };
  while (i < s.size()) {
    const char c = s[i];
    if (is_space(c)) {
      ++i;
      continue;
    }
    switch (expect) {
      case Expect::Colon:
        if (c != ':') return {S::Invalid, i};
        expect = Expect::Value;
        ++i;
        continue;
      case Expect::CommaOrClose:
        if (c == ',') {
          expect = open.back() == '{' ? Expect::Key : Expect::Value;
          ++i;
          continue;
        }
        if ((c == '}' && open.back() == '{') || (c == ']' && open.back() == '[')) {
          open.pop_back();
          ++i;
          if (after_value()) return {S::Complete, i};
          continue;
        }
        return {S::Invalid, i};
      case Expect::KeyOrClose:
        if (c == '}') {
          open.pop_back();
          ++i;
          if (after_value()) return {S::Complete, i};
          continue;
        }
        [[fallthrough]];
      case Expect::Key:
        if (c != '"') return {S::Invalid, i};
        break;  // the string below, then a colon
      case Expect::ValueOrClose:
        if (c == ']') {
          open.pop_back();
          ++i;
          if (after_value()) return {S::Complete, i};
          continue;
        }
        [[fallthrough]];
      case Expect::Value: break;
    }
    const bool is_key = expect == Expect::Key || expect == Expect::KeyOrClose;
    if (c == '"') {
      ++i;
      while (i < s.size() && s[i] != '"') {
        if (static_cast<unsigned char>(s[i]) < 0x20) return {S::Invalid, i};
        i += s[i] == '\\' ? 2 : 1;
      }
      if (i >= s.size()) return {S::Incomplete, s.size()};
      ++i;
      if (is_key) {
        expect = Expect::Colon;
        continue;
      }
      if (after_value()) return {S::Complete, i};
      continue;
    }
    if (is_key) return {S::Invalid, i};
    if (c == '{' || c == '[') {
      open.push_back(c);
      expect = c == '{' ? Expect::KeyOrClose : Expect::ValueOrClose;
      ++i;
      continue;
    }
    if (c == '-' || (c >= '0' && c <= '9')) {
      const size_t begin = i;
      ++i;
      while (i < s.size() && (std::isdigit(static_cast<unsigned char>(s[i])) || s[i] == '.' || s[i] == 'e' ||
                              s[i] == 'E' || s[i] == '+' || s[i] == '-'))
        ++i;
      if (i >= s.size()) return {S::Incomplete, s.size()};
      if (i == begin + 1 && c == '-') return {S::Invalid, i};
      if (after_value()) return {S::Complete, i};
      continue;
    }
    for (std::string_view lit : {std::string_view("true"), std::string_view("false"), std::string_view("null")}) {
      if (c != lit[0]) continue;
      const std::string_view rest = s.substr(i, lit.size());
      if (lit.substr(0, rest.size()) != rest) return {S::Invalid, i};
      if (rest.size() < lit.size()) return {S::Incomplete, s.size()};
      i += lit.size();
      if (after_value()) return {S::Complete, i};
      goto next;
    }
    return {S::Invalid, i};
  next:;
  }
  return {S::Incomplete, s.size()};
}

size_t partial_marker_suffix(std::string_view text, std::string_view marker) {
  if (marker.empty()) return 0;
  for (size_t n = std::min(text.size(), marker.size() - 1); n > 0; --n) {
    if (text.substr(text.size() - n) == marker.substr(0, n)) return n;
  }
  return 0;
}

}  // namespace kiln::chat
