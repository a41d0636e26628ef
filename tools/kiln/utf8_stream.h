// Utf8Stream: writes text to a stream as it grows, holding back a UTF-8 sequence that is not
// complete yet, so a terminal never shows half a character. Bytes that are not UTF-8 pass through
// unchanged. Not thread-safe.
#pragma once

#include <cstdio>
#include <string>
#include <string_view>

namespace kiln::cli {

class Utf8Stream {
 public:
  explicit Utf8Stream(FILE* out) : out_(out) {}
  ~Utf8Stream() { finish(); }
  void write(std::string_view text);
  // Writes what is held back (an incomplete sequence at the very end of the text).
  void finish();

 private:
  FILE* out_;
  std::string pending_;
};

}  // namespace kiln::cli
