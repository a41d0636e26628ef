// The tokenizer of a Hugging Face folder -> GGUF tokenizer.* metadata, as llama.cpp's
// convert_hf_to_gguf.py writes it:
// - tokenizer.model (SentencePiece) -> tokenizer.ggml.model "llama", pre "default", tokens,
//   scores and token types from the pieces, then added_tokens.json and tokenizer_config.json's
//   added_tokens_decoder (special ones become CONTROL with score -1000), padded to vocab_size
//   with "[PAD{i}]" (UNUSED, score -10000).
// - else tokenizer.json with a BPE model -> tokenizer.ggml.model "gpt2", tokens, token types,
//   merges, and the pre-tokenizer name llama.cpp would choose. llama.cpp identifies it by hashing
//   a tokenization (its chkhsh table); kiln reads tokenizer.json's pre_tokenizer instead and knows
//   the GPT-2 (byte-level regex), llama3 and qwen2 split patterns; any other is an Error.
// Then, for both: special token ids (matched by content in tokenizer.json's added_tokens, else
// config.json's *_token_id), add_bos/add_eos from tokenizer_config.json, and the chat template.
// Partial: a BPE added token with normalized=false is written as is (llama.cpp round-trips it
// through the HF tokenizer), and add_bos is not inferred from tokenizer.json's post_processor.
#pragma once

#include <string>

#include "convert/hf_config.h"
#include "core/gguf.h"
#include "core/result.h"

namespace kiln::convert {

// Writes tokenizer.* keys for the tokenizer files in `dir`.
Status write_vocab(const std::string& dir, const HfModelConfig& c, GgufWriter& w);

// The tokenizer.ggml.pre name for a tokenizer.json pre_tokenizer object, or an Error.
Result<std::string> bpe_pre_name(const nlohmann::json& pre_tokenizer);

}  // namespace kiln::convert
