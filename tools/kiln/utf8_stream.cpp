#include "utf8_stream.h"

#include <algorithm>

namespace kiln::cli {
namespace {

// The length of the UTF-8 sequence a lead byte starts; 0 for a continuation or invalid byte.
size_t utf8_sequence_length(unsigned char lead) {
  if (lead < 0x80) return 1;
  if ((lead & 0xE0) == 0xC0) return 2;
  if ((lead & 0xF0) == 0xE0) return 3;
  if ((lead & 0xF8) == 0xF0) return 4;
  return 0;
}

// How many bytes at the end of `s` begin a sequence that is not complete yet (0..3).
size_t incomplete_tail(std::string_view s) {
  const size_t look = std::min<size_t>(3, s.size());
  for (size_t back = 1; back <= look; ++back) {
    const auto c = static_cast<unsigned char>(s[s.size() - back]);
    if ((c & 0xC0) == 0x80) continue;  // a continuation byte: look further back for its lead
    const size_t need = utf8_sequence_length(c);
    return need > back ? back : 0;
  }
  return 0;
}

}  // namespace

void Utf8Stream::write(std::string_view text) {
  pending_.append(text);
  const size_t ready = pending_.size() - incomplete_tail(pending_);
  if (ready == 0) return;
  std::fwrite(pending_.data(), 1, ready, out_);
  std::fflush(out_);
  pending_.erase(0, ready);
}

void Utf8Stream::finish() {
  if (pending_.empty()) return;
  std::fwrite(pending_.data(), 1, pending_.size(), out_);
  std::fflush(out_);
  pending_.clear();
}

}  // namespace kiln::cli
