// The user's lines for `kiln chat`: from a terminal with line editing and history (BSD libedit:
// arrows, Home/End, Ctrl-A/E/K/U/W, Up/Down through this session's lines; ~/.editrc applies), or
// plain lines when standard input is a pipe or a file. Either way, Ctrl-C while waiting for a line
// ends the wait: the SIGINT handler makes `interrupt_fd` readable.
// History lives in memory for the session only (llama.cpp's chat keeps none on disk either).
// Not thread-safe: one reader of standard input.
#pragma once

#include <memory>
#include <string>

namespace kiln::cli {

enum class Input { Line, End, Interrupted };

class LineInput {
 public:
  // A terminal reader when standard input is a terminal, else a plain one.
  static std::unique_ptr<LineInput> open(int interrupt_fd);
  virtual ~LineInput() = default;

  virtual bool is_terminal() const = 0;
  // The next line without its line break, read after showing `prompt` on stderr (terminals only).
  // End when the input is exhausted (Ctrl-D on an empty line); Interrupted after a Ctrl-C.
  virtual Input next(const char* prompt, std::string& line) = 0;
};

}  // namespace kiln::cli
