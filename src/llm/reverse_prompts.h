// Reverse prompts (llama.cpp's -r/--reverse-prompt): texts that end a reply when the output ends
// with one of them. As llama.cpp does it: the text of the sequence's last 32 tokens (the prompt's
// included, control tokens written out) is searched for each reverse prompt in its last
// (length + slack) bytes, and a reverse prompt that is a single token (a control token such as
// <|im_end|>) also matches that token's id. `kiln run` (and the C API's generate) allow a slack of 2 bytes (the prompt may
// have been tokenized together with a following character or two); `kiln chat` none.
// Not thread-safe; the tokenizer must outlive it.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "text/tokenizer.h"

namespace kiln {

class ReversePrompts {
 public:
  ReversePrompts(const text::Tokenizer& tok, std::vector<std::string> prompts, size_t slack);

  bool empty() const { return prompts_.empty(); }
  // Whether the sequence `earlier` (oldest first) followed by `last` ends with a reverse prompt.
  bool found(std::span<const int32_t> earlier, int32_t last) const;

 private:
  const text::Tokenizer* tok_;
  std::vector<std::string> prompts_;
  std::vector<int32_t> single_tokens_;  // the reverse prompts that are one token
  size_t slack_;
};

}  // namespace kiln
