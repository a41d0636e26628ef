// UGM: SentencePiece's unigram model (tokenizer.ggml.model "t5"; T5, XLM-R, nomic-bert-moe). The
// text is normalized (SentencePiece's precompiled charsmap, spaces as U+2581, an optional space
// prefix, runs of spaces merged when remove_extra_whitespaces), then cut into the tokens whose
// scores sum highest (Viterbi over the vocabulary; user-defined tokens score 0, a codepoint no token
// covers becomes the unknown token, runs of unknowns merge into one).
// ref: llama.cpp src/llama-vocab.cpp, llm_tokenizer_ugm and llm_tokenizer_ugm_session.
//
// The charsmap, as SentencePiece writes it: a little-endian u32 byte size B, B bytes of an
// XOR-compressed compact double array (XCDA, 32-bit units) over input byte strings, then
// NUL-terminated replacement strings that the array's leaves index. Indices outside the array or
// the strings (a damaged file) end a match instead of failing; llama.cpp throws there.
// Internal to src/text. Thread-safety: immutable after construction.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "text/byte_trie.h"
#include "text/vocab.h"

namespace kiln::text {

class UgmTokenizer {
 public:
  explicit UgmTokenizer(const Vocab& vocab);

  // Appends the ids of one raw-text fragment; `vocab` is the one given to the constructor.
  void tokenize(const Vocab& vocab, std::string_view text, std::vector<int32_t>& out) const;

  // The normalized text (for tests).
  std::string normalize(const Vocab& vocab, std::string_view text) const;

 private:
  struct Piece {
    std::string_view text;  // the normalized form of the consumed input
    size_t consumed = 0;    // input bytes
  };
  Piece normalize_prefix(std::string_view input, size_t offset) const;
  // The XCDA unit at `index`, or 0 (a unit that matches no input byte) outside the array.
  uint32_t unit(size_t index) const { return index < xcda_.size() ? xcda_[index] : 0; }

  ByteTrie tokens_;        // normal, user-defined and unused tokens -> id
  ByteTrie user_defined_;  // user-defined tokens, which bypass normalization
  std::vector<uint32_t> xcda_;
  std::string replacements_;  // NUL-terminated strings
  double unknown_score_ = 0;  // the lowest normal token's score, less 10
};

}  // namespace kiln::text
