#include "text/grammar/grammar_vocab.h"

#include <algorithm>
#include <numeric>

#include "text/tokenizer.h"

namespace kiln::grammar {

std::shared_ptr<const GrammarVocab> GrammarVocab::build(const text::Tokenizer& tokenizer) {
  auto v = std::make_shared<GrammarVocab>();
  const int32_t n = tokenizer.n_tokens();
  v->pieces_.resize(static_cast<size_t>(n));
  std::vector<uint8_t> eog(static_cast<size_t>(n), 0);
  for (int32_t id = 0; id < n; ++id) {
    auto piece = tokenizer.token_to_piece(id, /*special=*/true);
    if (piece.ok()) v->pieces_[static_cast<size_t>(id)] = std::move(*piece);
    eog[static_cast<size_t>(id)] = tokenizer.is_eog(id) ? 1 : 0;
  }
  v->index(eog);
  return v;
}

std::shared_ptr<const GrammarVocab> GrammarVocab::from_pieces(std::vector<std::string> pieces,
                                                              const std::vector<int32_t>& eog_ids) {
  auto v = std::make_shared<GrammarVocab>();
  v->pieces_ = std::move(pieces);
  std::vector<uint8_t> eog(v->pieces_.size(), 0);
  for (int32_t id : eog_ids) eog.at(static_cast<size_t>(id)) = 1;
  v->index(eog);
  return v;
}

void GrammarVocab::index(const std::vector<uint8_t>& eog) {
  const size_t n = pieces_.size();
  kinds_.assign(n, Kind::Empty);
  partial_.assign(n, PartialUtf8{});
  cp_begin_.assign(n + 1, 0);
  node_of_.assign(n, UINT32_MAX);
  std::vector<int32_t> text_ids;
  for (size_t id = 0; id < n; ++id) {
    cp_begin_[id] = static_cast<uint32_t>(cps_.size());
    const std::string& piece = pieces_[id];
    // ref: llama_grammar_apply_impl: end-of-generation first, then empty or NUL-led pieces.
    if (eog[id]) {
      kinds_[id] = Kind::EndOfGen;
      continue;
    }
    if (piece.empty() || piece[0] == '\0') continue;
    kinds_[id] = Kind::Text;
    DecodedPiece d = decode_piece(piece);
    partial_[id] = d.partial;
    if (d.partial.n_remain < 0) continue;
    cps_.insert(cps_.end(), d.code_points.begin(), d.code_points.end());
    max_code_points_ = std::max(max_code_points_, static_cast<uint32_t>(d.code_points.size()));
    text_ids.push_back(static_cast<int32_t>(id));
  }
  cp_begin_[n] = static_cast<uint32_t>(cps_.size());

  // Sort by code points (a prefix before its extensions), then lay the trie out in preorder.
  auto span_of = [&](int32_t id) {
    return std::pair{cps_.data() + cp_begin_[static_cast<size_t>(id)], cps_.data() + cp_begin_[static_cast<size_t>(id) + 1]};
  };
  std::stable_sort(text_ids.begin(), text_ids.end(), [&](int32_t a, int32_t b) {
    auto [a0, a1] = span_of(a);
    auto [b0, b1] = span_of(b);
    return std::lexicographical_compare(a0, a1, b0, b1);
  });
  trie_.clear();
  trie_.push_back({0, 0, 0});
  std::vector<uint32_t> path{0};  // node indices from the root
  const uint32_t* prev_begin = nullptr;
  const uint32_t* prev_end = nullptr;
  for (int32_t id : text_ids) {
    auto [b, e] = span_of(id);
    size_t common = 0;
    if (prev_begin != nullptr) {
      while (prev_begin + common < prev_end && b + common < e && prev_begin[common] == b[common]) ++common;
    }
    // Close the nodes deeper than the common prefix.
    while (path.size() > common + 1) {
      trie_[path.back()].end = static_cast<uint32_t>(trie_.size());
      path.pop_back();
    }
    for (const uint32_t* c = b + common; c < e; ++c) {
      const auto node = static_cast<uint32_t>(trie_.size());
      trie_.push_back({*c, 0, static_cast<uint32_t>(tokens_by_node_.size())});
      path.push_back(node);
    }
    node_of_[static_cast<size_t>(id)] = path.back();
    tokens_by_node_.push_back(id);
    prev_begin = b;
    prev_end = e;
  }
  while (!path.empty()) {
    trie_[path.back()].end = static_cast<uint32_t>(trie_.size());
    path.pop_back();
  }
}

}  // namespace kiln::grammar
