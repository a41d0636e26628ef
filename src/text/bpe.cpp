// Byte-level BPE tokenizer. ref: llama.cpp llm_tokenizer_bpe_session.
#include <algorithm>
#include <queue>
#include <string>

#include "text/sessions.h"
#include "text/unicode.h"

namespace kiln::text {

namespace {

struct Symbol {
  int prev;
  int next;
  size_t offset;  // into the word
  size_t n;       // bytes; 0 once merged into its left neighbour
};

struct Bigram {
  int left;
  int right;
  std::string text;
  int rank;
};

// Lowest rank first; on a tie, the leftmost pair.
struct BigramOrder {
  bool operator()(const Bigram& l, const Bigram& r) const {
    return l.rank > r.rank || (l.rank == r.rank && l.left > r.left);
  }
};

// Merges one pre-tokenized word and appends its ids.
class BpeWord {
 public:
  BpeWord(const Vocab& vocab, std::string_view word) : vocab_(vocab), word_(word) {}

  void run(std::vector<int32_t>& out) {
    const PreTokenizerConfig& pre = vocab_.pre();
    const bool newline_run =
        pre.whole_newline_runs && word_.find_first_not_of('\n') == std::string_view::npos;
    if ((vocab_.ignore_merges() || newline_run) && vocab_.find(word_) != kTokenNull) {
      symbols_.push_back({-1, -1, 0, word_.size()});
    } else {
      size_t offs = 0;
      int index = 0;
      while (offs < word_.size()) {
        const size_t len = std::min(utf8_len(word_[offs]), word_.size() - offs);
        symbols_.push_back({index - 1, offs + len == word_.size() ? -1 : index + 1, offs, len});
        offs += len;
        ++index;
      }
    }
    for (int i = 1; i < int(symbols_.size()); ++i) add_bigram(i - 1, i);

    while (!queue_.empty()) {
      Bigram b = queue_.top();
      queue_.pop();
      Symbol& left = symbols_[b.left];
      Symbol& right = symbols_[b.right];
      if (left.n == 0 || right.n == 0) continue;
      if (left.n + right.n != b.text.size() || word_.substr(left.offset, left.n + right.n) != b.text)
        continue;
      left.n += right.n;
      right.n = 0;
      left.next = right.next;
      if (right.next >= 0) symbols_[right.next].prev = b.left;
      add_bigram(left.prev, b.left);
      add_bigram(b.left, left.next);
    }

    for (const Symbol& s : symbols_) {
      if (s.n == 0) continue;
      const std::string_view text = word_.substr(s.offset, s.n);
      const int32_t id = vocab_.find(text);
      if (id != kTokenNull) {
        out.push_back(id);
        continue;
      }
      // no token for the merged piece: one token per byte, where the vocabulary has one (the
      // byte's own text in a GPT-2-encoded word, else its <0xXX> token)
      for (char c : text) {
        const int32_t b = pre.byte_encode ? vocab_.find(std::string_view(&c, 1))
                                          : vocab_.find(byte_token_text(static_cast<uint8_t>(c)));
        if (b != kTokenNull) out.push_back(b);
      }
    }
  }

 private:
  void add_bigram(int left, int right) {
    if (left == -1 || right == -1) return;
    const std::string_view l = word_.substr(symbols_[left].offset, symbols_[left].n);
    const std::string_view r = word_.substr(symbols_[right].offset, symbols_[right].n);
    const int rank = vocab_.bpe_rank(l, r);
    if (rank < 0) return;
    std::string text;
    text.reserve(l.size() + r.size());
    text.append(l).append(r);
    queue_.push({left, right, std::move(text), rank});
  }

  const Vocab& vocab_;
  std::string_view word_;
  std::vector<Symbol> symbols_;
  std::priority_queue<Bigram, std::vector<Bigram>, BigramOrder> queue_;
};

}  // namespace

void bpe_tokenize(const Vocab& vocab, const PreTokenizer& pre, std::string_view text,
                  std::vector<int32_t>& out) {
  for (const std::string& word : pre.split(text, vocab.pre().byte_encode)) BpeWord(vocab, word).run(out);
}

}  // namespace kiln::text
