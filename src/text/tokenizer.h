// Tokenizer: text <-> token ids for a GGUF vocabulary, identical to llama.cpp's llama_tokenize /
// llama_token_to_piece / llama_detokenize (ref: llama.cpp src/llama-vocab.cpp). Supports SPM
// (tokenizer.ggml.model "llama", with byte fallback), byte-level BPE ("gpt2", with the
// pre-tokenizers of text/pretokenizer.h), Gemma 4's SentencePiece-style BPE ("gemma4"), WPM
// ("bert") and UGM ("t5", text/ugm.h). A "no_vocab" file gives a tokenizer that produces no
// tokens. RWKV, PLaMo-2 and the other models llama.cpp knows are refused at load.
//
// Usage:
//   KILN_ASSIGN_OR_RETURN(Tokenizer tok, Tokenizer::from_gguf(*file));
//   std::vector<int32_t> ids = tok.tokenize("Hello", /*add_special=*/true, /*parse_special=*/false);
//   KILN_ASSIGN_OR_RETURN(std::string text, tok.detokenize(ids, /*remove_special=*/true, false));
// Thread-safety: immutable after construction; all methods may run concurrently.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/gguf.h"
#include "core/result.h"
#include "text/pretokenizer.h"
#include "text/ugm.h"
#include "text/vocab.h"

namespace kiln::text {

class Tokenizer {
 public:
  // Reads the vocabulary of `file` (metadata only; tensor data is not touched).
  static Result<Tokenizer> from_gguf(const GgufFile& file, const VocabOptions& options = {});
  static Result<Tokenizer> from_vocab(Vocab vocab);

  const Vocab& vocab() const { return *vocab_; }
  int32_t n_tokens() const { return vocab_->n_tokens(); }

  // Text (any bytes; invalid UTF-8 is handled as llama.cpp does) to ids. `add_special` adds
  // BOS/EOS/SEP as the vocabulary asks; `parse_special` lets control tokens written in the text
  // (e.g. "<|im_start|>") become their ids. User-defined tokens are matched even without it.
  std::vector<int32_t> tokenize(std::string_view text, bool add_special, bool parse_special) const;

  // A count the tokens of `text` cannot be under, in O(1), so that a caller can refuse a text too
  // long for its context before tokenizing it: SPM and BPE cover every byte of the text with
  // pieces of at most the vocabulary's longest piece (an unknown character is one <unk> of 5+
  // bytes); 0 for WPM and UGM, whose normalization may drop or merge characters.
  size_t min_tokens(std::string_view text) const;

  // The text of one token: control and unknown tokens render only when `special` is true.
  // An Error for an id outside the vocabulary.
  Result<std::string> token_to_piece(int32_t id, bool special) const;

  // Ids to text with llama.cpp's spacing rules (SPM's leading space, clean-up of " ." and " 's" for
  // vocabularies that ask for it). `remove_special` drops a leading BOS / trailing EOS the
  // vocabulary adds; `unparse_special` renders control tokens. An Error names a bad id.
  Result<std::string> detokenize(std::span<const int32_t> ids, bool remove_special,
                                 bool unparse_special) const;

  bool is_eog(int32_t id) const { return vocab_->is_eog(id); }
  int32_t bos() const { return vocab_->bos(); }
  int32_t eos() const { return vocab_->eos(); }
  int32_t eot() const { return vocab_->eot(); }
  int32_t eom() const { return vocab_->eom(); }
  int32_t unk() const { return vocab_->unk(); }
  int32_t sep() const { return vocab_->sep(); }
  int32_t pad() const { return vocab_->pad(); }
  // The newline token, as llama.cpp picks it: SPM's byte token for '\n', else the first token of
  // "\n" (BPE, UGM); failing that (and for WPM), Vocab::default_pad().
  int32_t nl() const { return nl_; }
  bool add_bos() const { return vocab_->add_bos(); }
  bool add_eos() const { return vocab_->add_eos(); }

 private:
  struct Fragment {
    int32_t token = kTokenNull;  // kTokenNull: raw text [offset, offset + length)
    size_t offset = 0;
    size_t length = 0;
  };
  std::vector<Fragment> partition(std::string_view text, bool parse_special) const;
  std::string render(int32_t id) const;  // the piece with special = true

  std::shared_ptr<const Vocab> vocab_;
  std::shared_ptr<const PreTokenizer> pre_;                 // BPE only
  std::shared_ptr<const UgmTokenizer> ugm_;                 // UGM only
  std::shared_ptr<const std::vector<std::string>> pieces_;  // render() of every id
  int32_t nl_ = kTokenNull;
  size_t max_piece_bytes_ = 0;  // the longest render() (at least 4: one code point)
};

}  // namespace kiln::text
