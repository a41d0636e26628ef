// `kiln chat`: a conversation in the terminal through the model's chat template.
//   kiln chat [-m MODEL.gguf] [-sys TEXT] [-p TEXT [-st]] [-n N] [--chat-template-file F] [options]
//
// Each turn renders the whole conversation with the template (generation prompt added), tokenizes
// it as `kiln serve` does, and decodes only the tokens after the longest prefix it shares with what
// the KV cache holds, so a turn costs its new tokens. The reply streams to stdout, one reply per
// turn followed by a newline; prompts, messages and timings go to stderr.
//
// A conversation that no longer leaves room for a reply (-n tokens, or a quarter of the context
// when -n is -1; at most half the context) loses its oldest turns, the system prompt kept, and a
// line on stderr says how many messages went. A message that does not fit even alone is refused
// and the chat goes on. Ctrl-C stops a reply (the text so far stays in the conversation); at the
// prompt it ends the chat with exit code 130.
#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "command.h"
#include "generation.h"
#include "model_flags.h"
#include "sampler_flags.h"
#include "serve/completion_request.h"
#include "serve/model_chat_template.h"
#include "text_file.h"

namespace kiln::cli {
namespace {

// Ctrl-C: the handler (on whichever thread the signal lands) raises the flag, which a reply
// checks before each token, and writes a byte into a pipe, which wakes the prompt's poll(2).
volatile std::sig_atomic_t g_interrupted = 0;
int g_interrupt_pipe[2] = {-1, -1};

void on_sigint(int) {
  g_interrupted = 1;
  const char byte = 1;
  [[maybe_unused]] const ssize_t n = ::write(g_interrupt_pipe[1], &byte, 1);  // full pipe: already pending
}

// Forgets a Ctrl-C that was handled (a reply it stopped) or came while nothing listened.
void clear_interrupt() {
  char drain[64];
  while (::read(g_interrupt_pipe[0], drain, sizeof drain) > 0) {
  }
  g_interrupted = 0;
}

bool install_interrupt_handler() {
  if (::pipe(g_interrupt_pipe) != 0) return false;
  for (int fd : g_interrupt_pipe) ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
  struct sigaction sa {};
  sa.sa_handler = on_sigint;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  return sigaction(SIGINT, &sa, nullptr) == 0;
}

enum class Input { Line, End, Interrupted };

// Lines of standard input; a Ctrl-C while waiting for one ends the wait.
class StdinLines {
 public:
  // The next line, without its line break; End when the input is exhausted.
  Input next(std::string& line) {
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
      pollfd fds[2] = {{STDIN_FILENO, POLLIN, 0}, {g_interrupt_pipe[0], POLLIN, 0}};
      if (::poll(fds, 2, -1) < 0) {
        if (errno == EINTR) continue;
        eof_ = true;
        continue;
      }
      if (fds[1].revents != 0) return Input::Interrupted;
      char chunk[4096];
      const ssize_t n = ::read(STDIN_FILENO, chunk, sizeof chunk);
      if (n > 0) {
        buf_.append(chunk, static_cast<size_t>(n));
      } else if (n < 0 && errno == EINTR) {
        continue;
      } else {
        eof_ = true;  // end of input, or a read error: nothing more will come
      }
    }
  }

 private:
  std::string buf_;
  bool eof_ = false;
};

// One user message: a line, continued onto the next while it ends in '\'.
Input read_message(StdinLines& in, bool tty, std::string& message) {
  message.clear();
  if (tty) std::fputs("> ", stderr);
  std::string line;
  while (true) {
    const Input r = in.next(line);
    if (r == Input::End && !message.empty()) return Input::Line;  // the input ended inside a continuation
    if (r != Input::Line) return r;
    if (!line.empty() && line.back() == '\\') {
      line.back() = '\n';
      message += line;
      if (tty) std::fputs(". ", stderr);
      continue;
    }
    message += line;
    return Input::Line;
  }
}

ChatMessage chat_message(std::string role, std::string content) {
  ChatMessage m;
  m.role = std::move(role);
  m.content = std::move(content);
  return m;
}

bool is_blank(const std::string& s) {
  return std::all_of(s.begin(), s.end(),
                     [](char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; });
}

struct ChatOptions {
  int64_t n_predict = -1;  // most tokens per reply; -1: until end of generation or a full context
  int64_t n_batch = 2048;  // most prompt tokens per decode call
  bool verbose = false;    // timings after every reply
};

// A conversation with one model through its chat template, in sequence 0 of a Context.
// Not thread-safe. The Context, Sampler and template must outlive it.
class ChatSession {
 public:
  ChatSession(Context& ctx, Sampler& sampler, const ModelChatTemplate& chat, const std::string& system_prompt,
              ChatOptions options)
      : ctx_(ctx), sampler_(sampler), chat_(chat), options_(options) {
    if (!system_prompt.empty()) messages_.push_back(chat_message("system", system_prompt));
    n_fixed_ = messages_.size();
  }

  // A new conversation: only the system prompt stays (its tokens stay cached too).
  void reset() { messages_.resize(n_fixed_); }

  // The user's message and the model's reply, streamed to stdout. Problems with the message (a
  // template error, no room) are reported on stderr and leave the conversation as it was; the
  // error returned is a failed decode, after which the chat cannot go on.
  Status turn(const std::string& user_message) {
    messages_.push_back(chat_message("user", user_message));
    auto tokens = fit_conversation();
    if (!tokens) {
      messages_.pop_back();
      return {};
    }
    // Decode what the cache does not hold yet; at least the last token, whose logits we need.
    size_t keep = 0;
    while (keep < cached_.tokens.size() && keep < tokens->size() && cached_.tokens[keep] == (*tokens)[keep])
      ++keep;
    keep = std::min(keep, tokens->size() - 1);
    ctx_.seq_rm(cached_.seq, static_cast<int32_t>(keep), -1);
    cached_.tokens.resize(keep);
    const auto t_prompt = Clock::now();
    KILN_ASSIGN_OR_RETURN(const size_t last,
                          decode_tokens(ctx_, std::span(*tokens).subspan(keep), cached_, options_.n_batch));
    const double prompt_s = seconds_since(t_prompt);
    sampler_.reset_history();
    for (int32_t t : *tokens) sampler_.accept(t);

    const auto t_gen = Clock::now();
    Utf8Stream out(stdout);
    KILN_ASSIGN_OR_RETURN(const GenerateResult reply,
                          generate(ctx_, sampler_, ctx_.logits(last), cached_,
                                   {.n_predict = options_.n_predict, .interrupted = &g_interrupted}, out));
    const double gen_s = seconds_since(t_gen);
    std::fputs("\n", stdout);
    std::fflush(stdout);
    clear_interrupt();  // a Ctrl-C from now on is one at the prompt
    if (reply.stop == StopReason::ContextFull) {
      std::fprintf(stderr,
                   "kiln chat: the context of %lld tokens is full: the reply stops here (the oldest turns "
                   "make room with your next message; /reset starts over)\n",
                   static_cast<long long>(ctx_.n_ctx()));
    } else if (reply.stop == StopReason::Interrupted) {
      std::fprintf(stderr, "kiln chat: reply interrupted\n");
    }
    if (reply.stop == StopReason::Interrupted && reply.text.empty()) {
      messages_.pop_back();  // nothing was said: the turn did not happen
    } else {
      messages_.push_back(chat_message("assistant", reply.text));
    }

    const size_t n_new = tokens->size() - keep;
    ++n_replies_;
    n_prompt_ += static_cast<int64_t>(n_new);
    n_generated_ += reply.n_generated;
    prompt_s_ += prompt_s;
    gen_s_ += gen_s;
    if (options_.verbose) {
      std::fprintf(stderr,
                   "kiln chat: prompt %zu new tokens (%zu cached) in %.2f s (%.1f t/s), reply %lld tokens in "
                   "%.2f s (%.1f t/s)\n",
                   n_new, keep, prompt_s, static_cast<double>(n_new) / std::max(prompt_s, 1e-9),
                   static_cast<long long>(reply.n_generated), gen_s,
                   static_cast<double>(reply.n_generated) / std::max(gen_s, 1e-9));
    }
    return {};
  }

  void print_totals() const {
    std::fprintf(stderr,
                 "kiln chat: %lld replies; prompt %lld tokens in %.2f s (%.1f t/s), generated %lld tokens in "
                 "%.2f s (%.1f t/s)\n",
                 static_cast<long long>(n_replies_), static_cast<long long>(n_prompt_), prompt_s_,
                 static_cast<double>(n_prompt_) / std::max(prompt_s_, 1e-9),
                 static_cast<long long>(n_generated_), gen_s_,
                 static_cast<double>(n_generated_) / std::max(gen_s_, 1e-9));
  }

 private:
  // The conversation's tokens, with the generation prompt.
  Result<std::vector<int32_t>> render(const std::vector<ChatMessage>& messages) const {
    ChatRenderOptions ro;
    ro.messages = messages;
    ro.add_generation_prompt = true;
    ro.bos_token = chat_.bos_text;
    ro.eos_token = chat_.eos_text;
    KILN_ASSIGN_OR_RETURN(const std::string text, chat_.chat_template.render(ro));
    return serve::tokenize_chat(ctx_.model().tokenizer(), text);
  }

  // Tokens the reply may need: -n, or a quarter of the context when -n is -1; at least 1, at most
  // half the context.
  int64_t reply_room() const {
    const int64_t n_ctx = ctx_.n_ctx();
    const int64_t want = options_.n_predict >= 0 ? options_.n_predict : n_ctx / 4;
    return std::max<int64_t>(1, std::min(want, n_ctx / 2));
  }

  // The tokens of the conversation, after dropping its oldest turns (never the system prompt nor
  // the last message) until they leave reply_room() free. Nullopt, with the reason on stderr, when
  // the template fails or the last message does not fit even alone; the conversation is then as it
  // was.
  std::optional<std::vector<int32_t>> fit_conversation() {
    const int64_t limit = ctx_.n_ctx() - reply_room();
    auto tokens = render(messages_);
    if (!tokens.ok()) {
      std::fprintf(stderr, "kiln chat: %s\n", tokens.error().message.c_str());
      return std::nullopt;
    }
    if (static_cast<int64_t>(tokens->size()) <= limit) return std::move(*tokens);
    std::vector<ChatMessage> alone(messages_.begin(),
                                   messages_.begin() + static_cast<std::ptrdiff_t>(n_fixed_));
    alone.push_back(messages_.back());
    auto alone_tokens = render(alone);
    if (!alone_tokens.ok() || static_cast<int64_t>(alone_tokens->size()) > limit) {
      if (!alone_tokens.ok()) {
        std::fprintf(stderr, "kiln chat: %s\n", alone_tokens.error().message.c_str());
      } else {
        std::fprintf(stderr,
                     "kiln chat: this message makes a prompt of %zu tokens%s, which leaves no room for a "
                     "reply of %lld tokens in the context of %lld (raise -c, or send a shorter message)\n",
                     alone_tokens->size(), n_fixed_ > 0 ? " with the system prompt" : "",
                     static_cast<long long>(reply_room()), static_cast<long long>(ctx_.n_ctx()));
      }
      return std::nullopt;
    }
    // Drop whole turns: from the first message after the system prompt up to the next user message.
    std::vector<ChatMessage> kept = messages_;
    size_t n_dropped = 0;
    while (static_cast<int64_t>(tokens->size()) > limit) {
      auto first = kept.begin() + static_cast<std::ptrdiff_t>(n_fixed_);
      do {
        first = kept.erase(first);
        ++n_dropped;
      } while (first + 1 != kept.end() && first->role != "user");
      tokens = render(kept);
      if (!tokens.ok()) {
        std::fprintf(stderr, "kiln chat: %s\n", tokens.error().message.c_str());
        return std::nullopt;
      }
    }
    messages_ = std::move(kept);
    std::fprintf(stderr,
                 "kiln chat: the conversation no longer fits the context of %lld tokens: dropped the %zu "
                 "oldest messages (the system prompt stays; /reset starts over)\n",
                 static_cast<long long>(ctx_.n_ctx()), n_dropped);
    return std::move(*tokens);
  }

  Context& ctx_;
  Sampler& sampler_;
  const ModelChatTemplate& chat_;
  ChatOptions options_;
  std::vector<ChatMessage> messages_;
  size_t n_fixed_ = 0;     // leading messages never dropped (the system prompt)
  SequenceState cached_;   // what sequence 0 of the KV cache holds
  int64_t n_replies_ = 0, n_prompt_ = 0, n_generated_ = 0;
  double prompt_s_ = 0, gen_s_ = 0;
};

constexpr const char* kHelp =
    "  /exit    end the chat (also Ctrl-D, or Ctrl-C at the prompt)\n"
    "  /reset   start a new conversation (the system prompt stays)\n"
    "  /help    this list\n"
    "  A line ending in '\\' continues the message on the next line. Ctrl-C stops a reply.\n";

int run_chat(int argc, char** argv) {
  ModelFlags mf;
  SamplerFlags sf;
  std::string system_prompt, prompt, template_file;
  ChatOptions co;
  bool single_turn = false;
  OptionParser p("chat", "kiln chat [-m MODEL.gguf] [-sys TEXT] [-p TEXT [-st]] [-n N] [options]");
  mf.declare(p);
  p.value({"-sys", "--system-prompt"}, &system_prompt, "TEXT", "the system message of the conversation");
  p.value({"-p", "--prompt"}, &prompt, "TEXT",
          "the first user message (then the chat goes on, unless --single-turn)");
  p.flag({"-st", "--single-turn"}, &single_turn, "answer one message (-p, or the first line read) and exit");
  p.value({"-n", "--n-predict"}, &co.n_predict, "N", "most tokens per reply (default -1: until end of text)");
  p.value({"--chat-template-file"}, &template_file, "FILE",
          "Jinja chat template to use instead of the model's (default: the model's, else ChatML)");
  p.flag({"-v", "--verbose"}, &co.verbose, "print the template's origin and timings after every reply");
  sf.declare(p);
  if (auto code = p.parse(argc, argv)) return *code;
  if (auto code = mf.list_devices_if_asked("chat")) return *code;
  co.n_batch = mf.context.n_batch;
  std::string template_source;
  if (!template_file.empty()) {
    auto text = read_text_file(template_file);
    if (!text.ok()) {
      std::fprintf(stderr, "kiln chat: --chat-template-file: %s\n", text.error().message.c_str());
      return 1;
    }
    template_source = std::move(*text);
    if (template_source.empty()) {
      std::fprintf(stderr, "kiln chat: --chat-template-file: '%s' is empty\n", template_file.c_str());
      return 1;
    }
  }

  auto model = mf.load_model("chat");
  if (!model) return 1;
  auto chat = choose_chat_template(*model, template_source);
  if (!chat.ok()) {
    std::fprintf(stderr, "kiln chat: %s\n", chat.error().message.c_str());
    return 1;
  }
  if (co.verbose) std::fprintf(stderr, "kiln chat: chat template: %s\n", chat->origin.c_str());
  auto sampler = sf.make_sampler(*model, "chat");
  if (!sampler) return 1;
  auto mc = mf.create_context("chat", model, mf.context);
  if (!mc) return 1;
  if (!install_interrupt_handler()) {
    std::fprintf(stderr, "kiln chat: cannot install the Ctrl-C handler: %s\n", std::strerror(errno));
    return 1;
  }

  ChatSession session(*mc->context, *sampler, *chat, system_prompt, co);
  const bool tty = isatty(STDIN_FILENO) != 0;
  if (tty) std::fprintf(stderr, "kiln chat: /help lists the commands; /exit or Ctrl-D ends the chat\n");
  StdinLines in;
  int exit_code = 0;
  auto reply = [&](const std::string& message) {
    const Status st = session.turn(message);
    if (st.ok()) return true;
    std::fprintf(stderr, "kiln chat: %s\n", st.error().message.c_str());
    exit_code = 1;
    return false;
  };
  bool go_on = true;
  if (!prompt.empty()) {
    if (tty) std::fprintf(stderr, "> %s\n", prompt.c_str());
    go_on = reply(prompt) && !single_turn;
  }
  std::string message;
  while (go_on) {
    const Input r = read_message(in, tty, message);
    if (r == Input::Interrupted) {
      if (tty) std::fputs("\n", stderr);
      exit_code = 130;
      break;
    }
    if (r == Input::End) {
      if (tty) std::fputs("\n", stderr);
      break;
    }
    if (message == "/exit") break;
    if (message == "/reset") {
      session.reset();
      std::fprintf(stderr, "kiln chat: new conversation\n");
      continue;
    }
    if (message == "/help") {
      std::fputs(kHelp, stderr);
      continue;
    }
    if (is_blank(message)) continue;
    go_on = reply(message) && !single_turn;
  }
  session.print_totals();
  return exit_code;
}

}  // namespace

KILN_COMMAND(chat, "talk with a model in the terminal, through its chat template", run_chat);

}  // namespace kiln::cli
