// Vocab: a tokenizer vocabulary read from GGUF metadata (tokenizer.ggml.*), with the defaults,
// special ids, token attributes and end-of-generation set llama.cpp derives from the same keys
// (ref: llama.cpp src/llama-vocab.cpp, llama_vocab::impl::load).
// Thread-safety: immutable after from_gguf(); concurrent readers are fine.
#pragma once

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/gguf.h"
#include "core/result.h"
#include "text/pretokenizer.h"

namespace kiln::text {

inline constexpr int32_t kTokenNull = -1;

enum class VocabType { kNone, kSpm, kBpe, kWpm, kUgm };
std::string_view vocab_type_name(VocabType t);

// Token attributes (bit values as llama.cpp's llama_token_attr).
enum TokenAttr : uint32_t {
  kAttrUndefined = 0,
  kAttrUnknown = 1u << 0,
  kAttrUnused = 1u << 1,
  kAttrNormal = 1u << 2,
  kAttrControl = 1u << 3,
  kAttrUserDefined = 1u << 4,
  kAttrByte = 1u << 5,
  kAttrNormalized = 1u << 6,
  kAttrLstrip = 1u << 7,
  kAttrRstrip = 1u << 8,
  kAttrSingleWord = 1u << 9,
};

struct TokenData {
  std::string text;
  float score = 0.0f;
  uint32_t attr = kAttrNormal;
};

struct VocabOptions {
  // Use this pre-tokenizer instead of the file's tokenizer.ggml.pre (BPE only), e.g. for a file
  // converted without one, where llama.cpp falls back to "default".
  std::optional<std::string> pre;
};

class Vocab {
 public:
  // Reads the tokenizer.ggml.* keys. Errors name the key and the numbers (missing or mistyped
  // arrays, arrays shorter than the token list, duplicate tokens, unknown model or pre-tokenizer).
  static Result<Vocab> from_gguf(const GgufFile& file, const VocabOptions& options = {});

  VocabType type() const { return type_; }
  const std::string& model() const { return model_; }  // tokenizer.ggml.model
  const PreTokenizerConfig& pre() const { return pre_; }
  int32_t n_tokens() const { return static_cast<int32_t>(tokens_.size()); }
  bool valid(int32_t id) const { return id >= 0 && id < n_tokens(); }
  const TokenData& token(int32_t id) const {
    KILN_ASSERT(valid(id), "token id out of range");
    return tokens_[id];
  }
  int32_t find(std::string_view text) const;  // kTokenNull when absent
  // Rank of the merge "left right" (lower merges first); -1 when there is none.
  int bpe_rank(std::string_view left, std::string_view right) const;
  // The token for one byte: SPM and UGM: <0xXX>, else the byte itself; BPE and WPM: the byte's
  // GPT-2 form (llama.cpp's byte_to_token). kTokenNull when the vocabulary has none.
  int32_t byte_to_token(uint8_t byte) const;
  size_t max_token_len() const { return max_token_len_; }

  int32_t bos() const { return bos_; }
  int32_t eos() const { return eos_; }
  int32_t eot() const { return eot_; }
  int32_t eom() const { return eom_; }
  int32_t unk() const { return unk_; }
  int32_t sep() const { return sep_; }
  int32_t pad() const { return pad_; }
  int32_t mask() const { return mask_; }
  // The tokenizer model's own padding id, before the file's keys apply: llama.cpp's newline token
  // when it finds none (it picks the newline before it reads the special ids).
  int32_t default_pad() const { return default_pad_; }
  int32_t fim_pre() const { return fim_pre_; }
  int32_t fim_suf() const { return fim_suf_; }
  int32_t fim_mid() const { return fim_mid_; }
  int32_t fim_pad() const { return fim_pad_; }
  int32_t fim_rep() const { return fim_rep_; }
  int32_t fim_sep() const { return fim_sep_; }

  bool add_bos() const { return add_bos_; }
  bool add_eos() const { return add_eos_; }
  bool add_sep() const { return add_sep_; }
  bool add_space_prefix() const { return add_space_prefix_; }
  bool remove_extra_whitespaces() const { return remove_extra_whitespaces_; }  // UGM normalizer
  // Spaces are written as U+2581 in token texts (SPM, UGM, SentencePiece-style BPE).
  bool escape_whitespaces() const { return escape_whitespaces_; }
  bool clean_spaces() const { return clean_spaces_; }
  bool ignore_merges() const { return pre_.ignore_merges; }
  bool lowercase() const { return lowercase_; }          // WPM normalizer
  bool strip_accents() const { return strip_accents_; }  // WPM normalizer

  bool is_eog(int32_t id) const { return id != kTokenNull && eog_.count(id) > 0; }
  const std::set<int32_t>& eog_ids() const { return eog_; }
  // Control, user-defined and unknown tokens, longest text first: the order in which they are
  // cut out of raw text before tokenizing.
  const std::vector<int32_t>& special_tokens() const { return special_tokens_; }
  // UGM: SentencePiece's precompiled normalization map (tokenizer.ggml.precompiled_charsmap),
  // empty when the file has none. Its size was checked at load (see text/ugm.h for the layout).
  const std::vector<uint8_t>& precompiled_charsmap() const { return charsmap_; }

 private:
  struct StringHash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  using StringMap = std::unordered_map<std::string, int32_t, StringHash, std::equal_to<>>;

  Status load_merges(const GgufFile& file);
  Status load_charsmap(const GgufFile& file);
  Status load_tokens(const GgufFile& file);
  Status load_special_ids(const GgufFile& file);
  void detect_special_tokens(const GgufFile& file);

  VocabType type_ = VocabType::kNone;
  std::string model_;
  PreTokenizerConfig pre_;
  std::vector<TokenData> tokens_;
  StringMap token_to_id_;
  StringMap bpe_ranks_;  // key: left + '\0' + right
  size_t max_token_len_ = 0;

  int32_t bos_ = kTokenNull, eos_ = kTokenNull, eot_ = kTokenNull, eom_ = kTokenNull, unk_ = kTokenNull;
  int32_t sep_ = kTokenNull, pad_ = kTokenNull, mask_ = kTokenNull, default_pad_ = kTokenNull;
  int32_t fim_pre_ = kTokenNull, fim_suf_ = kTokenNull, fim_mid_ = kTokenNull;
  int32_t fim_pad_ = kTokenNull, fim_rep_ = kTokenNull, fim_sep_ = kTokenNull;

  bool add_bos_ = false, add_eos_ = false, add_sep_ = false;
  bool add_space_prefix_ = false, clean_spaces_ = false;
  bool remove_extra_whitespaces_ = false, escape_whitespaces_ = false;
  bool lowercase_ = true, strip_accents_ = true;

  std::set<int32_t> eog_;
  std::vector<int32_t> special_tokens_;
  std::vector<uint8_t> charsmap_;
};

}  // namespace kiln::text
