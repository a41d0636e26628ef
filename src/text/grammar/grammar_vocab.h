// GrammarVocab: what grammar-constrained sampling needs to know about a vocabulary, computed once
// per tokenizer: every token's piece (control tokens rendered, as llama.cpp's grammar sees them),
// its code points, whether it ends a generation, and a trie of all tokens by code points so that
// one walk decides the whole vocabulary with shared prefixes visited once.
//
// Thread-safety: immutable after build(); share it (shared_ptr<const GrammarVocab>) between any
// number of constraints and threads.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "text/grammar/utf8_decode.h"

namespace kiln::text {
class Tokenizer;
}

namespace kiln::grammar {

class GrammarVocab {
 public:
  // How a token takes part in grammar matching (ref: llama_grammar_apply_impl).
  enum class Kind : uint8_t {
    Text,      // a piece of text (its bytes may be invalid UTF-8 on their own: a continuation byte
               // can still finish a character an earlier piece began)
    EndOfGen,  // an end-of-generation token: allowed only where the grammar may end
    Empty      // an empty piece or one starting with NUL: never allowed
  };

  static std::shared_ptr<const GrammarVocab> build(const text::Tokenizer& tokenizer);
  // For tests: a vocabulary of plain pieces; `eog` lists end-of-generation ids.
  static std::shared_ptr<const GrammarVocab> from_pieces(std::vector<std::string> pieces, const std::vector<int32_t>& eog);

  int32_t n_tokens() const { return static_cast<int32_t>(pieces_.size()); }
  const std::string& piece(int32_t id) const { return pieces_[static_cast<size_t>(id)]; }
  Kind kind(int32_t id) const { return kinds_[static_cast<size_t>(id)]; }
  // The code points of a Text token decoded from a clean start, and the sequence it leaves open
  // (n_remain -1: not UTF-8 from a clean start; such tokens are not in the trie).
  const uint32_t* code_points(int32_t id) const { return cps_.data() + cp_begin_[static_cast<size_t>(id)]; }
  uint32_t n_code_points(int32_t id) const {
    return cp_begin_[static_cast<size_t>(id) + 1] - cp_begin_[static_cast<size_t>(id)];
  }
  PartialUtf8 trailing_partial(int32_t id) const { return partial_[static_cast<size_t>(id)]; }
  // The most code points of any token (the trie's depth).
  uint32_t max_code_points() const { return max_code_points_; }

  // The trie over the code points of Text tokens that are UTF-8 from a clean start, nodes in depth-first preorder: node 0 is the root
  // (the empty prefix); node n's subtree is [n, trie_end(n)); its children follow it directly.
  struct TrieNode {
    uint32_t cp;        // the code point on the edge from the parent
    uint32_t end;       // one past the last node of the subtree
    uint32_t tok_begin; // tokens_by_node()[tok_begin(n) .. tok_begin(n+1)) end exactly here
  };
  const std::vector<TrieNode>& trie() const { return trie_; }
  // Text token ids ordered by their trie node (so a subtree's tokens are contiguous).
  const std::vector<int32_t>& tokens_by_node() const { return tokens_by_node_; }
  // Node index of each Text token (UINT32_MAX for the other kinds).
  uint32_t node_of(int32_t id) const { return node_of_[static_cast<size_t>(id)]; }
  // tok_begin of the node after n (n + 1 < trie().size()), or the total count.
  uint32_t tok_end_at(uint32_t n) const {
    return n + 1 < trie_.size() ? trie_[n + 1].tok_begin : static_cast<uint32_t>(tokens_by_node_.size());
  }
  // First token index of the subtree after node n's subtree.
  uint32_t subtree_tok_end(uint32_t n) const {
    return trie_[n].end < trie_.size() ? trie_[trie_[n].end].tok_begin : static_cast<uint32_t>(tokens_by_node_.size());
  }

 private:
  void index(const std::vector<uint8_t>& eog);

  std::vector<std::string> pieces_;
  std::vector<Kind> kinds_;
  std::vector<uint32_t> cps_;
  std::vector<uint32_t> cp_begin_;  // n_tokens + 1 offsets into cps_
  std::vector<PartialUtf8> partial_;
  std::vector<TrieNode> trie_;
  std::vector<int32_t> tokens_by_node_;
  std::vector<uint32_t> node_of_;
  uint32_t max_code_points_ = 0;
};

}  // namespace kiln::grammar
