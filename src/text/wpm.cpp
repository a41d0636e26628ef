// WordPiece tokenizer (BERT). ref: llama.cpp llm_tokenizer_wpm_session.
#include <algorithm>
#include <string>

#include "text/sessions.h"
#include "text/unicode.h"

namespace kiln::text {

namespace {

// CJK ideographs that BERT splits into single-character words. The 0x2B920 start copies
// HuggingFace's (and llama.cpp's) range.
bool is_chinese_char(uint32_t c) {
  return (c >= 0x04E00 && c <= 0x09FFF) || (c >= 0x03400 && c <= 0x04DBF) || (c >= 0x20000 && c <= 0x2A6DF) ||
         (c >= 0x2A700 && c <= 0x2B73F) || (c >= 0x2B740 && c <= 0x2B81F) || (c >= 0x2B920 && c <= 0x2CEAF) ||
         (c >= 0x0F900 && c <= 0x0FAFF) || (c >= 0x2F800 && c <= 0x2FA1F);
}

// BERT's basic tokenizer: optional NFD + accent stripping and lowercasing; splits on whitespace,
// punctuation, ASCII symbols and CJK characters; drops NUL, U+FFFD and control characters.
std::vector<std::string> preprocess(const Vocab& vocab, std::string_view text) {
  std::vector<uint32_t> cpts = decode_utf8(text);
  if (vocab.strip_accents()) {
    for (uint32_t& c : cpts) c = nfd_base(c);
  }
  std::vector<std::string> words(1);
  for (const uint32_t c : cpts) {
    const CodepointFlags f = codepoint_flags(c);
    if (f.is_whitespace()) {
      if (!words.back().empty()) words.emplace_back();
      continue;
    }
    if (c == 0 || c == kReplacementChar || f.is_control()) continue;
    if (vocab.strip_accents() && f.is_accent_mark()) continue;
    const std::string s = encode_utf8(vocab.lowercase() ? to_lower(c) : c);
    if (f.is_punctuation() || (c < 0x7F && f.is_symbol()) || is_chinese_char(c)) {
      if (!words.back().empty()) words.emplace_back();
      words.back() = s;
      words.emplace_back();
    } else {
      words.back() += s;
    }
  }
  if (words.back().empty()) words.pop_back();
  return words;
}

}  // namespace

void wpm_tokenize(const Vocab& vocab, std::string_view text, std::vector<int32_t>& out) {
  for (const std::string& word : preprocess(vocab, text)) {
    if (word.empty()) continue;
    const std::string w = std::string(kEscapedSpace) + word;  // U+2581 marks a word start
    const size_t n = w.size();
    const size_t first = out.size();
    for (size_t i = 0; i < n; ++i) {
      bool match = false;
      for (size_t j = std::min(n, i + vocab.max_token_len() + 1); j > i; --j) {
        const int32_t id = vocab.find(std::string_view(w).substr(i, j - i));
        if (id != kTokenNull) {
          out.push_back(id);
          match = true;
          i = j - 1;
          break;
        }
      }
      if (!match) {  // the word has no segmentation: drop its pieces
        out.resize(first);
        break;
      }
    }
    if (out.size() == first && vocab.unk() != kTokenNull) out.push_back(vocab.unk());
  }
}

}  // namespace kiln::text
