#include "text/tokenizer.h"

#include <algorithm>
#include <cstdio>

#include "text/sessions.h"
#include "text/unicode.h"

namespace kiln::text {

namespace {

bool is_ascii_space(char c) { return c == ' ' || (c >= '\t' && c <= '\r'); }

// A BPE token's text back to bytes through GPT-2's byte mapping (ref: llama.cpp llama_decode_text,
// including its "[UNK_BYTE_0x..]" rendering of codepoints outside the mapping).
std::string decode_bpe_text(const std::string& text) {
  std::string out;
  for (uint32_t c : decode_utf8(text)) {
    const int b = utf8_to_byte(c);
    if (b >= 0) {
      out.push_back(static_cast<char>(b));
      continue;
    }
    out += "[UNK_BYTE_0x";
    for (char ch : encode_utf8(c)) {
      char hex[3];
      std::snprintf(hex, sizeof hex, "%02x", static_cast<uint8_t>(ch));
      out += hex;
    }
    out += text + "]";
  }
  return out;
}

// <0xXX> -> the byte (ref: llama.cpp token_to_byte: strtol of the two characters after "<0x").
char byte_of_token(const std::string& text) {
  int v = 0;
  for (size_t i = 3; i < 5 && i < text.size(); ++i) {
    const char c = text[i];
    const int d = c >= '0' && c <= '9'   ? c - '0'
                  : c >= 'a' && c <= 'f' ? c - 'a' + 10
                  : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                         : -1;
    if (d < 0) break;
    v = v * 16 + d;
  }
  return static_cast<char>(v);
}

}  // namespace

Result<Tokenizer> Tokenizer::from_gguf(const GgufFile& file, const VocabOptions& options) {
  KILN_ASSIGN_OR_RETURN(Vocab vocab, Vocab::from_gguf(file, options));
  return from_vocab(std::move(vocab));
}

Result<Tokenizer> Tokenizer::from_vocab(Vocab vocab) {
  Tokenizer t;
  if (vocab.type() == VocabType::kBpe) {
    KILN_ASSIGN_OR_RETURN(PreTokenizer pre, PreTokenizer::create(vocab.pre().regexes));
    t.pre_ = std::make_shared<const PreTokenizer>(std::move(pre));
  }
  if (vocab.type() == VocabType::kUgm) t.ugm_ = std::make_shared<const UgmTokenizer>(vocab);
  t.vocab_ = std::make_shared<const Vocab>(std::move(vocab));
  auto pieces = std::make_shared<std::vector<std::string>>(t.vocab_->n_tokens());
  t.max_piece_bytes_ = 4;
  for (int32_t id = 0; id < t.vocab_->n_tokens(); ++id) {
    (*pieces)[id] = t.render(id);
    t.max_piece_bytes_ = std::max(t.max_piece_bytes_, (*pieces)[id].size());
  }
  t.pieces_ = std::move(pieces);
  // ref: llama.cpp llama_vocab::impl::load, linefeed_id
  const Vocab& v = *t.vocab_;
  if (v.type() == VocabType::kSpm) {
    t.nl_ = v.byte_to_token('\n');
  } else if (v.type() == VocabType::kBpe || v.type() == VocabType::kUgm) {
    const std::vector<int32_t> ids = t.tokenize("\n", /*add_special=*/false, /*parse_special=*/false);
    if (!ids.empty()) t.nl_ = ids.front();
  }
  if (t.nl_ == kTokenNull) t.nl_ = v.default_pad();
  return t;
}

size_t Tokenizer::min_tokens(std::string_view text) const {
  const VocabType type = vocab_->type();
  if (type != VocabType::kSpm && type != VocabType::kBpe) return 0;
  return (text.size() + max_piece_bytes_ - 1) / max_piece_bytes_;
}

std::string Tokenizer::render(int32_t id) const {
  // ref: llama.cpp llama_vocab::impl::token_to_piece with special = true
  const TokenData& t = vocab_->token(id);
  if (t.attr & (kAttrUnknown | kAttrControl | kAttrUserDefined)) return t.text;
  if (t.attr & kAttrNormal) {
    if (vocab_->type() == VocabType::kBpe && !vocab_->escape_whitespaces()) return decode_bpe_text(t.text);
    return unescape_spaces(t.text);
  }
  if ((t.attr & kAttrByte) && vocab_->type() != VocabType::kWpm) return std::string(1, byte_of_token(t.text));
  return {};
}

std::vector<Tokenizer::Fragment> Tokenizer::partition(std::string_view text, bool parse_special) const {
  // ref: llama.cpp tokenizer_st_partition: cut every special token out of the raw fragments,
  // longest tokens first; LSTRIP / RSTRIP tokens swallow the ASCII whitespace beside them.
  std::vector<Fragment> frags;
  if (!text.empty()) frags.push_back({kTokenNull, 0, text.size()});
  for (const int32_t special : vocab_->special_tokens()) {
    const TokenData& data = vocab_->token(special);
    if (!parse_special && (data.attr & (kAttrControl | kAttrUnknown))) continue;
    const std::string& tok = data.text;
    std::vector<Fragment> next;
    next.reserve(frags.size());
    for (const Fragment& f : frags) {
      if (f.token != kTokenNull) {
        next.push_back(f);
        continue;
      }
      size_t off = f.offset, len = f.length;
      while (len > 0) {
        const size_t match = text.substr(0, off + len).find(tok, off);
        if (match == std::string_view::npos) {
          next.push_back({kTokenNull, off, len});
          break;
        }
        size_t left_len = match - off;
        if (data.attr & kAttrLstrip) {
          while (left_len > 0 && is_ascii_space(text[off + left_len - 1])) --left_len;
        }
        if (left_len > 0) next.push_back({kTokenNull, off, left_len});
        next.push_back({special, 0, 0});
        size_t right_off = match + tok.size();
        size_t right_len = off + len - right_off;
        if (data.attr & kAttrRstrip) {
          while (right_len > 0 && is_ascii_space(text[right_off])) ++right_off, --right_len;
        }
        off = right_off;
        len = right_len;
      }
    }
    frags = std::move(next);
  }
  return frags;
}

std::vector<int32_t> Tokenizer::tokenize(std::string_view text, bool add_special, bool parse_special) const {
  std::vector<int32_t> out;
  const Vocab& v = *vocab_;
  if (v.type() == VocabType::kNone) return out;
  const std::vector<Fragment> frags = partition(text, parse_special);
  // ref: llama.cpp llama_vocab::impl::tokenize
  switch (v.type()) {
    case VocabType::kSpm: {
      bool prev_special = true;  // a space prefix goes before the first text and after specials
      if (add_special && v.add_bos()) out.push_back(v.bos());
      for (const Fragment& f : frags) {
        if (f.token != kTokenNull) {
          out.push_back(f.token);
          prev_special = true;
          continue;
        }
        std::string piece;
        if (v.add_space_prefix() && prev_special) piece = " ";
        piece.append(text.substr(f.offset, f.length));
        spm_tokenize(v, escape_spaces(piece), out);
        prev_special = false;
      }
      if (add_special && v.add_eos()) out.push_back(v.eos());
      break;
    }
    case VocabType::kBpe: {
      if (add_special && v.add_bos()) out.push_back(v.bos());
      for (const Fragment& f : frags) {
        if (f.token != kTokenNull) {
          out.push_back(f.token);
        } else if (v.escape_whitespaces()) {
          bpe_tokenize(v, *pre_, escape_spaces(text.substr(f.offset, f.length)), out);
        } else {
          bpe_tokenize(v, *pre_, text.substr(f.offset, f.length), out);
        }
      }
      if (add_special && v.add_eos()) out.push_back(v.eos());
      break;
    }
    case VocabType::kUgm: {
      if (add_special && v.add_bos()) out.push_back(v.bos());
      for (const Fragment& f : frags) {
        if (f.token != kTokenNull) {
          out.push_back(f.token);
        } else {
          ugm_->tokenize(v, text.substr(f.offset, f.length), out);
        }
      }
      if (add_special && v.add_eos()) out.push_back(v.eos());
      break;
    }
    case VocabType::kWpm: {
      // llama.cpp adds BOS and SEP whenever add_special is set, whatever add_bos says.
      if (add_special && v.bos() != kTokenNull) out.push_back(v.bos());
      for (const Fragment& f : frags) {
        if (f.token != kTokenNull) {
          out.push_back(f.token);
        } else {
          wpm_tokenize(v, text.substr(f.offset, f.length), out);
        }
      }
      if (add_special && v.sep() != kTokenNull) out.push_back(v.sep());
      break;
    }
    case VocabType::kNone:
      break;
  }
  return out;
}

Result<std::string> Tokenizer::token_to_piece(int32_t id, bool special) const {
  if (!vocab_->valid(id))
    return make_error("tokenizer: token id ", id, " out of range [0, ", n_tokens(), ")");
  if (!special && (vocab_->token(id).attr & (kAttrUnknown | kAttrControl))) return std::string();
  return (*pieces_)[id];
}

Result<std::string> Tokenizer::detokenize(std::span<const int32_t> ids, bool remove_special,
                                          bool unparse_special) const {
  // ref: llama.cpp llama_vocab::impl::detokenize
  const Vocab& v = *vocab_;
  if (v.type() == VocabType::kNone) return std::string();
  for (size_t i = 0; i < ids.size(); ++i) {
    if (!v.valid(ids[i])) {
      return make_error("tokenizer: token id ", ids[i], " at position ", i, " out of range [0, ", n_tokens(),
                        ")");
    }
  }
  bool remove_space = v.add_space_prefix();
  if (remove_special && v.add_bos() && !ids.empty() && ids.front() == v.bos()) {
    remove_space = false;
    ids = ids.subspan(1);
  }
  if (remove_special && v.add_eos() && !ids.empty() && ids.back() == v.eos()) ids = ids.first(ids.size() - 1);

  std::string text;
  for (const int32_t id : ids) {
    if (!unparse_special && (v.token(id).attr & (kAttrUnknown | kAttrControl))) {
      remove_space = false;
      continue;
    }
    std::string_view piece = (*pieces_)[id];
    if (remove_space && !piece.empty() && piece.front() == ' ') piece.remove_prefix(1);
    remove_space = false;
    text.append(piece);
  }
  if (!v.clean_spaces()) return text;

  // pass 1: " ?", " !", " .", " ," lose the space
  size_t total = text.empty() ? 0 : 1;
  for (size_t i = 1; i < text.size(); ++i) {
    const char x = text[i];
    if (text[i - 1] == ' ' && (x == '?' || x == '!' || x == '.' || x == ',')) --total;
    text[total++] = x;
  }
  text.resize(total);
  // pass 2: a lone apostrophe between spaces loses both spaces
  const size_t total2 = text.size();
  total = total2 ? 1 : 0;
  for (size_t i = 1; i < total2; ++i) {
    const char x = text[i];
    if (x == '\'' && i + 1 < total2 && text[i - 1] == ' ' && text[i + 1] == ' ') {
      --total;
      text[++i] = '\0';
    }
    text[total++] = x;
  }
  text.resize(total);
  // pass 3: " 's", " 'm", " 're", " 've" lose the space
  const size_t total3 = text.size();
  total = total3 ? 1 : 0;
  for (size_t i = 1; i < total3; ++i) {
    const char x = text[i];
    if (text[i - 1] == ' ' && x == '\'' && i + 1 < total3) {
      const char x1 = text[i + 1];
      if (x1 == 's' || x1 == 'm') {
        --total;
      } else if (i + 2 < total3) {
        const char x2 = text[i + 2];
        if ((x1 == 'r' && x2 == 'e') || (x1 == 'v' && x2 == 'e')) --total;
      }
    }
    text[total++] = x;
  }
  text.resize(total);
  return text;
}

}  // namespace kiln::text
