#include "diffusion/clip_tokenizer.h"

#include <algorithm>

#include "core/check.h"
#include "diffusion/clip_merges.h"

namespace kiln::diffusion {
namespace {

constexpr std::string_view kEndOfWord = "</w>";
constexpr std::string_view kBos = "<|startoftext|>";
constexpr std::string_view kEos = "<|endoftext|>";

std::string utf8_of(uint32_t code_point) {
  std::string s;
  if (code_point < 0x80) {
    s += static_cast<char>(code_point);
  } else if (code_point < 0x800) {
    s += static_cast<char>(0xC0 | (code_point >> 6));
    s += static_cast<char>(0x80 | (code_point & 0x3F));
  } else {
    s += static_cast<char>(0xE0 | (code_point >> 12));
    s += static_cast<char>(0x80 | ((code_point >> 6) & 0x3F));
    s += static_cast<char>(0x80 | (code_point & 0x3F));
  }
  return s;
}

// GPT-2's bytes_to_unicode order: the printable bytes as themselves, then the others mapped to
// 256, 257, ... in byte order. Returns (byte, code point) in that order.
std::vector<std::pair<int, uint32_t>> byte_unicode_order() {
  std::vector<std::pair<int, uint32_t>> order;
  std::vector<bool> printable(256, false);
  for (int b = '!'; b <= '~'; ++b) printable[b] = true;
  for (int b = 161; b <= 172; ++b) printable[b] = true;
  for (int b = 174; b <= 255; ++b) printable[b] = true;
  for (int b = 0; b < 256; ++b) {
    if (printable[b]) order.emplace_back(b, static_cast<uint32_t>(b));
  }
  uint32_t next = 256;
  for (int b = 0; b < 256; ++b) {
    if (!printable[b]) order.emplace_back(b, next++);
  }
  return order;
}

bool is_space(unsigned char c) { return c == ' ' || (c >= '\t' && c <= '\r'); }
bool is_alpha(unsigned char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }
bool is_digit(unsigned char c) { return c >= '0' && c <= '9'; }

// Whitespace runs to one space, trimmed, ASCII lowercase.
std::string normalize(std::string_view text) {
  std::string out;
  bool pending_space = false;
  for (unsigned char c : text) {
    if (is_space(c)) {
      pending_space = !out.empty();
      continue;
    }
    if (pending_space) out += ' ';
    pending_space = false;
    out += static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
  }
  return out;
}

// The pre-tokenizer's pieces of `text` (see the header), in order.
std::vector<std::string> split_pieces(std::string_view text) {
  static constexpr std::string_view kContractions[] = {"s", "t", "re", "ve", "m", "ll", "d"};
  std::vector<std::string> pieces;
  size_t p = 0;
  while (p < text.size()) {
    const unsigned char c = text[p];
    size_t end = p;
    if (c == '\'') {
      for (std::string_view suffix : kContractions) {
        if (text.substr(p + 1, suffix.size()) == suffix) {
          end = p + 1 + suffix.size();
          break;
        }
      }
    }
    if (end == p && is_alpha(c)) {
      while (end < text.size() && is_alpha(text[end])) ++end;
    } else if (end == p && is_digit(c)) {
      end = p + 1;
    } else if (end == p && !is_space(c)) {
      while (end < text.size() && !is_space(text[end]) && !is_alpha(text[end]) && !is_digit(text[end])) ++end;
    }
    if (end == p) {
      ++p;  // whitespace separates pieces
      continue;
    }
    pieces.emplace_back(text.substr(p, end - p));
    p = end;
  }
  return pieces;
}

}  // namespace

const ClipTokenizer& ClipTokenizer::instance() {
  static const ClipTokenizer tokenizer;
  return tokenizer;
}

ClipTokenizer::ClipTokenizer() {
  byte_symbol_.resize(256);
  std::vector<std::string> vocab;
  const auto order = byte_unicode_order();
  for (const auto& [byte, code_point] : order) {
    byte_symbol_[byte] = utf8_of(code_point);
    vocab.push_back(byte_symbol_[byte]);
  }
  for (const auto& [byte, code_point] : order) vocab.push_back(byte_symbol_[byte] + std::string(kEndOfWord));

  const std::string_view text = clip_merges_text();
  size_t line_start = text.find('\n') + 1;  // past "#version: 0.2"
  int32_t rank = 0;
  while (line_start < text.size()) {
    const size_t line_end = text.find('\n', line_start);
    KILN_ASSERT(line_end != std::string_view::npos, "clip merges: last line without a newline");
    const std::string_view line = text.substr(line_start, line_end - line_start);
    const size_t space = line.find(' ');
    std::string first(line.substr(0, space));
    std::string second(line.substr(space + 1));
    vocab.push_back(first + second);
    merge_rank_.emplace(std::make_pair(std::move(first), std::move(second)), rank++);
    line_start = line_end + 1;
  }
  vocab.emplace_back(kBos);
  vocab.emplace_back(kEos);
  KILN_ASSERT(vocab.size() == kVocabSize, "clip merges: wrong vocabulary size");
  // Later duplicates win, as stable-diffusion.cpp's encoder map assignment does.
  for (size_t i = 0; i < vocab.size(); ++i) id_of_[vocab[i]] = static_cast<int32_t>(i);
}

std::vector<std::string> ClipTokenizer::bpe(const std::string& piece_bytes) const {
  std::vector<std::string> word;
  for (unsigned char b : piece_bytes) word.push_back(byte_symbol_[b]);
  word.back() += kEndOfWord;
  while (word.size() > 1) {
    // The adjacent pair of lowest merge rank (the first such in the set's order on ties: ranks
    // are unique, so there are none).
    int32_t best_rank = -1;
    std::pair<std::string, std::string> best;
    for (size_t i = 0; i + 1 < word.size(); ++i) {
      const auto it = merge_rank_.find({word[i], word[i + 1]});
      if (it != merge_rank_.end() && (best_rank < 0 || it->second < best_rank)) {
        best_rank = it->second;
        best = it->first;
      }
    }
    if (best_rank < 0) break;
    std::vector<std::string> merged;
    for (size_t i = 0; i < word.size();) {
      if (i + 1 < word.size() && word[i] == best.first && word[i + 1] == best.second) {
        merged.push_back(best.first + best.second);
        i += 2;
      } else {
        merged.push_back(word[i]);
        i += 1;
      }
    }
    word = std::move(merged);
  }
  return word;
}

std::vector<int32_t> ClipTokenizer::encode(std::string_view text) const {
  const std::string normalized = normalize(text);
  std::vector<int32_t> ids;
  auto encode_plain = [&](std::string_view plain) {
    for (const std::string& piece : split_pieces(plain)) {
      for (const std::string& symbol : bpe(piece)) {
        const auto it = id_of_.find(symbol);
        ids.push_back(it == id_of_.end() ? kEosId : it->second);
      }
    }
  };
  size_t pos = 0;
  while (pos < normalized.size()) {
    const size_t bos = normalized.find(kBos, pos);
    const size_t eos = normalized.find(kEos, pos);
    const size_t special = std::min(bos, eos);
    encode_plain(std::string_view(normalized)
                     .substr(pos, special == std::string::npos ? std::string::npos : special - pos));
    if (special == std::string::npos) break;
    ids.push_back(special == bos ? kBosId : kEosId);
    pos = special + (special == bos ? kBos.size() : kEos.size());
  }
  return ids;
}

}  // namespace kiln::diffusion
