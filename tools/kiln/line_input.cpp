#include "line_input.h"

#include <histedit.h>
#include <poll.h>
#include <unistd.h>

#include <cerrno>
#include <clocale>
#include <cstdio>
#include <cstring>
#include <cwchar>
#include <string_view>

namespace kiln::cli {
namespace {

enum class Wait { Readable, Interrupted, Failed };

// Waits until standard input has bytes (or its end) or `interrupt_fd` is readable.
Wait wait_for_stdin(int interrupt_fd) {
  while (true) {
    pollfd fds[2] = {{STDIN_FILENO, POLLIN, 0}, {interrupt_fd, POLLIN, 0}};
    if (::poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;  // the handler's byte in the pipe is seen next time round
      return Wait::Failed;
    }
    if (fds[1].revents != 0) return Wait::Interrupted;
    if (fds[0].revents != 0) return Wait::Readable;
  }
}

// Lines of a pipe or file, read in chunks.
class PlainLines : public LineInput {
 public:
  explicit PlainLines(int interrupt_fd) : interrupt_fd_(interrupt_fd) {}
  bool is_terminal() const override { return false; }

  Input next(const char*, std::string& line) override {
    while (true) {
      if (const size_t nl = buf_.find('\n'); nl != std::string::npos) {
        line.assign(buf_, 0, nl);
        buf_.erase(0, nl + 1);
        if (!line.empty() && line.back() == '\r') line.pop_back();
        return Input::Line;
      }
      if (eof_) {
        if (buf_.empty()) return Input::End;
        line = std::move(buf_);
        buf_.clear();
        return Input::Line;
      }
      const Wait w = wait_for_stdin(interrupt_fd_);
      if (w == Wait::Interrupted) return Input::Interrupted;
      if (w == Wait::Failed) {
        eof_ = true;
        continue;
      }
      char chunk[4096];
      const ssize_t n = ::read(STDIN_FILENO, chunk, sizeof chunk);
      if (n > 0) {
        buf_.append(chunk, static_cast<size_t>(n));
      } else if (!(n < 0 && errno == EINTR)) {
        eof_ = true;  // end of input, or a read error: nothing more will come
      }
    }
  }

 private:
  int interrupt_fd_;
  std::string buf_;
  bool eof_ = false;
};

// libedit on the terminal. Characters come through read_char (EL_GETCFN), which waits on the
// interrupt pipe too, so a Ctrl-C ends el_gets() at once; libedit's own signal handling is off.
class TerminalLines : public LineInput {
 public:
  explicit TerminalLines(int interrupt_fd) : interrupt_fd_(interrupt_fd) {
    // libedit edits wide characters: the locale's encoding, UTF-8 when the locale names none.
    const char* loc = std::setlocale(LC_CTYPE, "");
    if (loc == nullptr || std::string_view(loc) == "C" || std::string_view(loc) == "POSIX")
      std::setlocale(LC_CTYPE, "C.UTF-8");
    el_ = el_init("kiln", stdin, stderr, stderr);
    history_ = history_init();
    HistEvent ev;
    history(history_, &ev, H_SETSIZE, 1000);
    history(history_, &ev, H_SETUNIQUE, 1);
    el_set(el_, EL_CLIENTDATA, this);
    el_set(el_, EL_EDITOR, "emacs");
    el_set(el_, EL_SIGNAL, 0);
    el_set(el_, EL_PROMPT, &TerminalLines::prompt_of);
    el_set(el_, EL_HIST, history, history_);
    el_set(el_, EL_GETCFN, &TerminalLines::read_char);
    el_source(el_, nullptr);  // the user's ~/.editrc, as other libedit programs
  }
  ~TerminalLines() override {
    el_end(el_);
    history_end(history_);
  }
  bool is_terminal() const override { return true; }

  Input next(const char* prompt, std::string& line) override {
    prompt_ = prompt;
    interrupted_ = false;
    el_resize(el_);  // the window may have changed size since the last line
    int count = 0;
    const char* text = el_gets(el_, &count);
    if (interrupted_) return Input::Interrupted;
    if (text == nullptr || count <= 0) return Input::End;
    line.assign(text, static_cast<size_t>(count));
    if (!line.empty() && line.back() == '\n') line.pop_back();
    if (!line.empty()) {
      HistEvent ev;
      history(history_, &ev, H_ENTER, line.c_str());
    }
    return Input::Line;
  }

 private:
  static TerminalLines* self(EditLine* el) {
    void* data = nullptr;
    el_get(el, EL_CLIENTDATA, &data);
    return static_cast<TerminalLines*>(data);
  }
  static char* prompt_of(EditLine* el) { return const_cast<char*>(self(el)->prompt_); }

  // One character for libedit: 1 when read, 0 at the end of input, -1 after a Ctrl-C or an error.
  static int read_char(EditLine* el, wchar_t* out) {
    TerminalLines* t = self(el);
    std::mbstate_t state{};
    while (true) {
      const Wait w = wait_for_stdin(t->interrupt_fd_);
      if (w == Wait::Interrupted) t->interrupted_ = true;
      if (w != Wait::Readable) return -1;
      char byte = 0;
      const ssize_t n = ::read(STDIN_FILENO, &byte, 1);
      if (n == 0) return 0;
      if (n < 0) {
        if (errno == EINTR) continue;
        return -1;
      }
      const size_t r = std::mbrtowc(out, &byte, 1, &state);
      if (r == static_cast<size_t>(-2)) continue;  // inside a multibyte character
      if (r == static_cast<size_t>(-1)) {          // not in the locale's encoding: pass the byte on
        state = {};
        *out = static_cast<unsigned char>(byte);
      }
      return 1;
    }
  }

  int interrupt_fd_;
  EditLine* el_ = nullptr;
  History* history_ = nullptr;
  const char* prompt_ = "";
  bool interrupted_ = false;
};

}  // namespace

std::unique_ptr<LineInput> LineInput::open(int interrupt_fd) {
  if (isatty(STDIN_FILENO) && isatty(STDERR_FILENO)) return std::make_unique<TerminalLines>(interrupt_fd);
  return std::make_unique<PlainLines>(interrupt_fd);
}

}  // namespace kiln::cli
