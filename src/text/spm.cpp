// SPM tokenizer. ref: llama.cpp llm_tokenizer_spm_session.
#include <map>
#include <queue>
#include <string>

#include "text/sessions.h"
#include "text/unicode.h"

namespace kiln::text {

namespace {

struct Symbol {
  int prev;
  int next;
  size_t offset;  // into the text
  size_t n;       // bytes; 0 once merged into its left neighbour
};

struct Bigram {
  int left;
  int right;
  float score;
  size_t size;
};

// Highest score first; on a tie, the leftmost pair.
struct BigramOrder {
  bool operator()(const Bigram& l, const Bigram& r) const {
    return l.score < r.score || (l.score == r.score && l.left > r.left);
  }
};

class SpmSession {
 public:
  SpmSession(const Vocab& vocab, std::string_view text) : vocab_(vocab), text_(text) {}

  void run(std::vector<int32_t>& out) {
    // one symbol per UTF-8 character (by lead byte, clipped at the end)
    size_t offs = 0;
    int index = 0;
    while (offs < text_.size()) {
      const size_t len = std::min(utf8_len(text_[offs]), text_.size() - offs);
      symbols_.push_back({index - 1, offs + len == text_.size() ? -1 : index + 1, offs, len});
      offs += len;
      ++index;
    }
    for (int i = 1; i < int(symbols_.size()); ++i) try_add_bigram(i - 1, i);

    while (!queue_.empty()) {
      const Bigram b = queue_.top();
      queue_.pop();
      Symbol& left = symbols_[b.left];
      Symbol& right = symbols_[b.right];
      if (left.n == 0 || right.n == 0 || left.n + right.n != b.size) continue;  // stale
      left.n += right.n;
      right.n = 0;
      left.next = right.next;
      if (right.next >= 0) symbols_[right.next].prev = b.left;
      try_add_bigram(left.prev, b.left);
      try_add_bigram(b.left, left.next);
    }
    if (symbols_.empty()) return;
    for (int i = 0; i != -1; i = symbols_[i].next) resegment(symbols_[i], out);
  }

 private:
  std::string_view piece(const Symbol& s, size_t n) const { return text_.substr(s.offset, n); }

  void try_add_bigram(int left, int right) {
    if (left == -1 || right == -1) return;
    const std::string_view text = piece(symbols_[left], symbols_[left].n + symbols_[right].n);
    const int32_t id = vocab_.find(text);
    if (id == kTokenNull) return;
    queue_.push({left, right, vocab_.token(id).score, text.size()});
    rev_merge_[std::string(text)] = {left, right};
  }

  void resegment(const Symbol& s, std::vector<int32_t>& out) {
    const std::string_view text = piece(s, s.n);
    const int32_t id = vocab_.find(text);
    if (id != kTokenNull) {
      out.push_back(id);
      return;
    }
    auto it = rev_merge_.find(std::string(text));
    if (it == rev_merge_.end()) {
      // Byte fallback. llama.cpp throws when a byte has no token; kiln emits UNK instead (or
      // nothing when the vocabulary has no UNK either).
      for (char c : text) {
        const int32_t b = vocab_.byte_to_token(static_cast<uint8_t>(c));
        if (b != kTokenNull) {
          out.push_back(b);
        } else if (vocab_.unk() != kTokenNull) {
          out.push_back(vocab_.unk());
        }
      }
      return;
    }
    const auto [l, r] = it->second;
    resegment(symbols_[l], out);
    resegment(symbols_[r], out);
  }

  const Vocab& vocab_;
  std::string_view text_;
  std::vector<Symbol> symbols_;
  std::priority_queue<Bigram, std::vector<Bigram>, BigramOrder> queue_;
  std::map<std::string, std::pair<int, int>> rev_merge_;
};

}  // namespace

void spm_tokenize(const Vocab& vocab, std::string_view text, std::vector<int32_t>& out) {
  SpmSession(vocab, text).run(out);
}

}  // namespace kiln::text
