// BPE pre-tokenizers: the word splits llama.cpp applies before byte-level BPE, chosen by the GGUF
// key tokenizer.ggml.pre. Each pre-tokenizer is a list of regexes applied in turn, each one
// splitting the pieces left by the previous ones (ref: llama.cpp llm_tokenizer_bpe and
// unicode_regex_split). The GPT-2 and Llama-3 patterns run through hand-written matchers that
// reproduce llama.cpp's own custom splitters; the others through text/regex.h on the symbol
// streams llama.cpp feeds to std::regex.
// Thread-safety: immutable after create(); split() may run concurrently.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"
#include "text/regex.h"

namespace kiln::text {

// What a tokenizer.ggml.pre name selects.
struct PreTokenizerConfig {
  std::string name;                  // the tokenizer.ggml.pre value ("default" when absent)
  std::vector<std::string> regexes;  // applied in order
  bool clean_spaces = true;          // detokenize's clean-up of " ." " ," " 's" ...
  bool ignore_merges = false;        // a word that is a whole token skips the merges
  bool add_bos = false;              // default of tokenizer.ggml.add_bos_token
  bool force_bos = false;            // BOS is added even when the file says add_bos_token = false
  bool no_bos = false;               // the vocabulary has no BOS token unless the file names one
  // SentencePiece-style BPE (Gemma 4): spaces become U+2581 before splitting, words stay raw UTF-8
  // (no GPT-2 byte mapping), bytes without a token fall back to <0xXX> tokens, and pieces render
  // with U+2581 turned back into spaces.
  bool escape_whitespaces = false;
  bool byte_encode = true;          // words in GPT-2's byte-to-unicode encoding
  bool whole_newline_runs = false;  // a word of newlines that is a token skips the merges
};

// The configuration for `pre` (an empty name means llama.cpp's "default"). An Error for a name
// llama.cpp does not know, as llama.cpp refuses such files.
Result<PreTokenizerConfig> pre_tokenizer_config(std::string_view pre);

class PreTokenizer {
 public:
  static Result<PreTokenizer> create(const std::vector<std::string>& regexes);

  // Splits `text` (any bytes; invalid UTF-8 becomes U+FFFD) into words, ready for BPE merges: in
  // GPT-2's byte-to-unicode encoding when `byte_encode`, else as UTF-8.
  std::vector<std::string> split(std::string_view text, bool byte_encode = true) const;

  // The same split as codepoint counts per word (for tests and tools).
  std::vector<size_t> split_lengths(const std::vector<uint32_t>& cpts) const;

 private:
  enum class Kind { kGpt2, kLlama3, kRegex };
  struct Step {
    Kind kind = Kind::kRegex;
    Regex regex;
  };
  std::vector<Step> steps_;
};

}  // namespace kiln::text
