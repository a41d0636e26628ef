// CLIP's byte-level BPE tokenizer as stable-diffusion.cpp runs it (CLIP-L, OpenCLIP-H and
// OpenCLIP-bigG share it): the text is whitespace-collapsed, trimmed and ASCII-lowercased; the
// special tokens <|startoftext|> and <|endoftext|> are cut out first; the rest splits into
// contractions ('s 't 're 've 'm 'll 'd), runs of ASCII letters, single ASCII digits and runs of
// anything else that is not whitespace (stable-diffusion.cpp's std::regex classes are ASCII-only:
// every byte >= 0x80 counts as "anything else"); each piece is BPE-merged over its bytes with
// "</w>" on its last symbol.
// Vocabulary: 256 byte symbols, the same with "</w>", the 48,894 merges, then BOS and EOS.
// Thread-safety: immutable once built; instance() is safe from any thread.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace kiln::diffusion {

class ClipTokenizer {
 public:
  static constexpr int32_t kBosId = 49406;  // <|startoftext|>
  static constexpr int32_t kEosId = 49407;  // <|endoftext|>, also the unknown token
  static constexpr int32_t kVocabSize = 49408;

  // The tokenizer over clip_merges_text(), built on first use.
  static const ClipTokenizer& instance();

  // Token ids of `text`, no BOS/EOS added.
  std::vector<int32_t> encode(std::string_view text) const;

 private:
  ClipTokenizer();
  // The BPE symbols (UTF-8 of the byte-to-unicode characters) of one piece.
  std::vector<std::string> bpe(const std::string& piece_bytes) const;

  std::vector<std::string> byte_symbol_;  // byte -> its printable unicode character, UTF-8
  std::unordered_map<std::string, int32_t> id_of_;
  std::map<std::pair<std::string, std::string>, int32_t> merge_rank_;
};

}  // namespace kiln::diffusion
