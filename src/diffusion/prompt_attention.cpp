#include "diffusion/prompt_attention.h"

#include <cerrno>
#include <cstdlib>

namespace kiln::diffusion {
namespace {

enum class Kind { Open, OpenSquare, Weight, Close, CloseSquare, EscapedOpen, Break, Text };

struct Piece {
  Kind kind;
  std::string text;
};

bool is_word_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}
bool is_special(char c) {
  return c == '\\' || c == '(' || c == ')' || c == '[' || c == ']' || c == ':' || c == 'B';
}

// Length of ":<[+-]?[.0-9]+>)" at the start of `s`, or 0.
size_t weight_suffix_length(std::string_view s) {
  size_t i = 1;  // past ':'
  if (i < s.size() && (s[i] == '+' || s[i] == '-')) ++i;
  const size_t digits = i;
  while (i < s.size() && (s[i] == '.' || (s[i] >= '0' && s[i] <= '9'))) ++i;
  if (i == digits || i >= s.size() || s[i] != ')') return 0;
  return i + 1;
}

// The next piece at the start of `s` (non-empty), as stable-diffusion.cpp's regex alternation picks
// it. The rest always starts a fresh search, so a word boundary holds before its first character.
Piece next_piece(std::string_view s) {
  const char c = s[0];
  if (c == '\\') {
    if (s.size() > 1 && (s[1] == '(' || s[1] == ')' || s[1] == '[' || s[1] == ']' || s[1] == '\\')) {
      return {s[1] == '(' ? Kind::EscapedOpen : Kind::Text, std::string(s.substr(0, 2))};
    }
    return {Kind::Text, "\\"};
  }
  if (c == '(') return {Kind::Open, "("};
  if (c == '[') return {Kind::OpenSquare, "["};
  if (c == ':') {
    const size_t n = weight_suffix_length(s);
    if (n > 0) return {Kind::Weight, std::string(s.substr(1, n - 2))};
    return {Kind::Text, ":"};
  }
  if (c == ')') return {Kind::Close, ")"};
  if (c == ']') return {Kind::CloseSquare, "]"};
  if (c == 'B') {
    if (s.starts_with("BREAK") && (s.size() == 5 || !is_word_char(s[5]))) return {Kind::Break, "BREAK"};
    return {Kind::Text, "B"};
  }
  size_t end = 1;
  while (end < s.size() && !is_special(s[end])) ++end;
  return {Kind::Text, std::string(s.substr(0, end))};
}

}  // namespace

Result<std::vector<WeightedText>> parse_prompt_attention(std::string_view prompt) {
  constexpr float kRoundMultiplier = 1.1f;
  constexpr float kSquareMultiplier = 1 / 1.1f;
  std::vector<WeightedText> out;
  std::vector<size_t> open_round, open_square;
  auto multiply_from = [&](size_t start, float multiplier) {
    for (size_t p = start; p < out.size(); ++p) out[p].weight *= multiplier;
  };
  std::string_view rest = prompt;
  while (!rest.empty()) {
    Piece piece = next_piece(rest);
    rest.remove_prefix(piece.kind == Kind::Weight ? piece.text.size() + 2 : piece.text.size());
    switch (piece.kind) {
      case Kind::Open:
        open_round.push_back(out.size());
        break;
      case Kind::OpenSquare:
        open_square.push_back(out.size());
        break;
      case Kind::Weight: {
        char* end = nullptr;
        errno = 0;
        const float weight = std::strtof(piece.text.c_str(), &end);
        if (end == piece.text.c_str() || errno == ERANGE) {
          return make_error("prompt: the emphasis weight '", piece.text,
                            "' is not a number in float's range");
        }
        if (!open_round.empty()) {
          multiply_from(open_round.back(), weight);
          open_round.pop_back();
        }
        break;
      }
      case Kind::Close:
      case Kind::CloseSquare: {
        std::vector<size_t>& open = piece.kind == Kind::Close ? open_round : open_square;
        if (open.empty()) {
          out.push_back({std::move(piece.text), 1.0f});
        } else {
          multiply_from(open.back(), piece.kind == Kind::Close ? kRoundMultiplier : kSquareMultiplier);
          open.pop_back();
        }
        break;
      }
      case Kind::EscapedOpen:
        out.push_back({"(", 1.0f});
        break;
      case Kind::Break:
        out.push_back({"BREAK", kBreakWeight});
        break;
      case Kind::Text:
        out.push_back({std::move(piece.text), 1.0f});
        break;
    }
  }
  for (size_t start : open_round) multiply_from(start, kRoundMultiplier);
  for (size_t start : open_square) multiply_from(start, kSquareMultiplier);
  if (out.empty()) out.push_back({"", 1.0f});
  for (size_t i = 0; i + 1 < out.size();) {
    if (out[i].weight == out[i + 1].weight) {
      out[i].text += out[i + 1].text;
      out.erase(out.begin() + static_cast<std::ptrdiff_t>(i) + 1);
    } else {
      ++i;
    }
  }
  return out;
}

}  // namespace kiln::diffusion
