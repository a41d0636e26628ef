#include "text/ugm.h"

#include <algorithm>
#include <cfloat>
#include <cstring>

#include "text/unicode.h"

namespace kiln::text {

namespace {

constexpr std::string_view kReplacement = "\xEF\xBF\xBD";   // U+FFFD

// XCDA unit fields (ref: llama.cpp xcda_array_view; Kanda 2018).
uint32_t xcda_base(uint32_t unit) { return (unit >> 10) << ((unit & (1u << 9)) >> 6); }
uint32_t xcda_lcheck(uint32_t unit) { return unit & ((1u << 31) | 0xFF); }
bool xcda_leaf(uint32_t unit) { return (unit >> 8) & 1; }
uint32_t xcda_value(uint32_t unit) { return unit & ((1u << 31) - 1); }

}  // namespace

UgmTokenizer::UgmTokenizer(const Vocab& vocab) {
  std::vector<std::pair<std::string_view, int32_t>> tokens, user_defined;
  float min_score = FLT_MAX;
  for (int32_t id = 0; id < vocab.n_tokens(); ++id) {
    const TokenData& t = vocab.token(id);
    if (t.attr & kAttrNormal) min_score = std::min(min_score, t.score);
    if (t.attr & (kAttrNormal | kAttrUserDefined | kAttrUnused)) tokens.emplace_back(t.text, id);
    if (t.attr & kAttrUserDefined) user_defined.emplace_back(t.text, id);
  }
  tokens_ = ByteTrie(std::move(tokens));
  user_defined_ = ByteTrie(std::move(user_defined));
  unknown_score_ = min_score - 10.0f;  // float arithmetic, as llama.cpp's

  const std::vector<uint8_t>& map = vocab.precompiled_charsmap();
  if (!map.empty()) {  // sizes checked by Vocab::from_gguf
    uint32_t blob = 0;
    std::memcpy(&blob, map.data(), 4);
    xcda_.resize(blob / 4);
    std::memcpy(xcda_.data(), map.data() + 4, xcda_.size() * 4);
    replacements_.assign(reinterpret_cast<const char*>(map.data()) + 4 + blob, map.size() - 4 - blob);
  }
}

UgmTokenizer::Piece UgmTokenizer::normalize_prefix(std::string_view input, size_t offset) const {
  if (offset == input.size()) return {};
  // A user-defined token's text passes unchanged. (llama.cpp takes the length of the longest trie
  // path here, whether or not a token ends there; so does kiln.)
  if (const size_t n = user_defined_.walk_length(input.substr(offset)); n > 0)
    return {input.substr(offset, n), n};

  size_t match_len = 0;
  size_t match_off = 0;
  if (!xcda_.empty()) {
    uint32_t node = xcda_base(unit(0));
    for (size_t p = offset; p < input.size(); ++p) {
      const auto c = static_cast<uint8_t>(input[p]);
      if (c == 0) break;
      node ^= c;
      if (node >= xcda_.size() || xcda_lcheck(xcda_[node]) != c) break;
      const bool leaf = xcda_leaf(xcda_[node]);
      node ^= xcda_base(xcda_[node]);
      if (leaf) {
        if (node >= xcda_.size()) break;
        match_len = p - offset + 1;
        match_off = xcda_value(xcda_[node]);
      }
    }
  }
  if (match_len > 0 && match_off < replacements_.size()) {
    const size_t end = replacements_.find('\0', match_off);
    if (end != std::string::npos)
      return {std::string_view(replacements_).substr(match_off, end - match_off), match_len};
  }
  // A valid UTF-8 sequence passes unchanged; an invalid byte becomes U+FFFD.
  size_t next = offset;
  const uint32_t cpt = decode_utf8(input, next);
  if (cpt == kReplacementChar && next - offset == 1) return {kReplacement, 1};
  return {input.substr(offset, next - offset), next - offset};
}

std::string UgmTokenizer::normalize(const Vocab& vocab, std::string_view text) const {
  // ref: llama.cpp llm_tokenizer_ugm_session::normalize. SentencePiece's whitespace-as-suffix mode
  // has no GGUF key, so the space is only ever a prefix.
  const bool prepend_space = vocab.add_space_prefix();
  const bool merge_spaces = vocab.remove_extra_whitespaces();
  const std::string_view space = vocab.escape_whitespaces() ? kEscapedSpace : std::string_view(" ");
  std::string out;
  out.reserve(text.size() * 3);
  bool space_prepended = false;
  bool in_word = false;
  for (size_t offset = 0; offset < text.size();) {
    const Piece piece = normalize_prefix(text, offset);
    for (const char c : piece.text) {
      if (c != ' ') {
        if (!in_word) {
          in_word = true;
          if ((prepend_space && !space_prepended) || merge_spaces) {
            out.append(space);
            space_prepended = true;
          }
        }
        out.push_back(c);
      } else {
        in_word = false;
        if (!merge_spaces) out.append(space);
      }
    }
    offset += piece.consumed;
  }
  return out;
}

void UgmTokenizer::tokenize(const Vocab& vocab, std::string_view text, std::vector<int32_t>& out) const {
  const std::string norm = normalize(vocab, text);
  const size_t n = norm.size();
  if (n == 0) return;
  // best[i]: the highest-scoring segmentation of norm[0, i): its last token and where it starts
  struct Best {
    int32_t token;
    size_t start;
    double score;
  };
  const int32_t unk = vocab.unk();
  std::vector<Best> best(n + 1, {unk, 0, -DBL_MAX});
  best[0] = {unk, 0, 0.0};
  for (size_t in = 0; in < n;) {
    const size_t cpt_len = std::min(utf8_len(norm[in]), n - in);
    const double base = best[in].score;
    bool whole_cpt_token = false;
    size_t p = in;
    for (uint32_t node = tokens_.child(ByteTrie::root(), static_cast<uint8_t>(norm[p++]));
         node != ByteTrie::kNoNode; node = tokens_.child(node, static_cast<uint8_t>(norm[p++]))) {
      if (const int32_t id = tokens_.value(node); id >= 0) {
        if (p - in == cpt_len) whole_cpt_token = true;
        const TokenData& t = vocab.token(id);
        // user-defined tokens score 0 (normal scores are log probabilities, below 0); double sums
        // as SentencePiece's
        const double score = base + ((t.attr & kAttrUserDefined) ? 0.0 : double(t.score));
        if (score > best[p].score) best[p] = {id, in, score};
      }
      if (p == n) break;
    }
    if (!whole_cpt_token) {
      const double score = base + unknown_score_;
      if (score > best[in + cpt_len].score) best[in + cpt_len] = {unk, in, score};
    }
    in += cpt_len;
  }
  // Back from the end; consecutive unknown tokens become one.
  const size_t first = out.size();
  bool prev_unknown = false;
  for (size_t pos = n;;) {
    const Best& b = best[pos];
    const bool unknown = b.token == unk;
    if (!(prev_unknown && unknown)) out.push_back(b.token);
    if (b.start == 0) break;
    prev_unknown = unknown;
    pos = b.start;
  }
  std::reverse(out.begin() + static_cast<std::ptrdiff_t>(first), out.end());
}

}  // namespace kiln::text
