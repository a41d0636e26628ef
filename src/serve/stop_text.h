// StopText: the text of one generation as it grows token by token, with what may be sent to the
// client so far. Text that could be the start of a stop string, or an incomplete UTF-8 sequence,
// is held back until the next pieces decide it (stop strings are honoured across token
// boundaries, as llama-server does).
// Thread-safety: none; one generation owns one StopText.
#pragma once

#include <string>
#include <vector>

namespace kiln::serve {

class StopText {
 public:
  explicit StopText(std::vector<std::string> stops);

  // Appends a piece. Returns true when a stop string is now complete: the text is cut where it
  // begins and nothing after it is ever released.
  bool append(const std::string& piece);
  // Text that can be sent now (and is marked sent). `flush`: the generation ended, release the
  // held-back text too (unless a stop string cut it).
  std::string take(bool flush);
  const std::string& text() const { return text_; }

 private:
  std::vector<std::string> stops_;
  size_t max_stop_ = 0;
  std::string text_;
  size_t sent_ = 0;
  bool stopped_ = false;
};

// Bytes at the end of `s` that begin a UTF-8 sequence the string does not complete (0..3).
size_t incomplete_utf8_tail(const std::string& s);

}  // namespace kiln::serve
