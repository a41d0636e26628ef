// The per-algorithm tokenizers behind Tokenizer::tokenize, each appending the ids of one raw-text
// fragment to `out` (ref: llama.cpp llm_tokenizer_{spm,bpe,wpm}_session). Internal to src/text.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "text/pretokenizer.h"
#include "text/vocab.h"

namespace kiln::text {

// SPM: `text` already has spaces escaped as U+2581. Bigram merges by score; unknown pieces fall
// back to byte tokens.
void spm_tokenize(const Vocab& vocab, std::string_view text, std::vector<int32_t>& out);
// Byte-level BPE over the words of `pre`: merges by rank.
void bpe_tokenize(const Vocab& vocab, const PreTokenizer& pre, std::string_view text,
                  std::vector<int32_t>& out);
// WordPiece: BERT normalization, then longest-prefix matching per word.
void wpm_tokenize(const Vocab& vocab, std::string_view text, std::vector<int32_t>& out);

}  // namespace kiln::text
