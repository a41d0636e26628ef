// `kiln chat`: a conversation in the terminal through the model's chat template.
//   kiln chat [-m MODEL.gguf] [-sys TEXT] [-p TEXT [-st]] [-n N] [--chat-template-file F] [options]
//
// Each turn renders the whole conversation with the template (generation prompt added). When the
// rendering begins with the text of the previous turn's prompt and reply, only the text after it
// is tokenized, appended to those turns' tokens (the reply's as the model sampled them, which a
// re-tokenization of its text often does not give back: llama.cpp's chat does the same); else the
// whole rendering is tokenized as `kiln serve` does. Then only the tokens after the longest prefix
// shared with what the KV cache holds are decoded, so a turn costs its new tokens, after a
// finished, cut (-n), stopped (-r) or interrupted reply alike. The reply streams to stdout, one
// reply per turn followed by a newline; prompts, messages and timings go to stderr.
//
// A conversation that no longer leaves room for a reply (-n tokens, or a quarter of the context
// when -n is -1; at most half the context) loses its oldest turns, the system prompt kept, and a
// line on stderr says how many messages went. A message that does not fit even alone is refused
// and the chat goes on. Ctrl-C stops a reply (the text so far stays in the conversation); at the
// prompt it ends the chat with exit code 130. On a terminal, lines are edited with libedit
// (line_input.h); piped input is read line by line.
//
// With --mmproj, `/image FILE` and `/audio FILE` (or --image FILE and --audio FILE, for the first
// message) attach an image or an audio file to the next message, placed before its text in the
// order given, as llama-mtmd-cli does; media stay with their message (each image encoded once: the
// encoder caches by content) until their turn is dropped.
//
// Speculative decoding (--spec-type, -md, ... as `kiln run`): replies are the same tokens, drafted
// and verified in batches; -v and the totals say how many tokens were drafted and accepted. Not
// with --mmproj.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "command.h"
#include "line_input.h"
#include "llm/generation.h"
#include "llm/media_prompt.h"
#include "llm/reasoning_budget.h"
#include "llm/reverse_prompts.h"
#include "media_flags.h"
#include "messages.h"
#include "model_flags.h"
#include "reasoning_flags.h"
#include "sampler_flags.h"
#include "serve/completion_request.h"
#include "llm/model_chat_template.h"
#include "speculative_flags.h"
#include "stopwatch.h"
#include "text/chat/chat_plan.h"
#include "text/chat/chat_syntax.h"
#include "text/chat/text_util.h"
#include "user_files.h"
#include "utf8_stream.h"

namespace kiln::cli {
namespace {

// Ctrl-C: the handler (on whichever thread the signal lands) raises the flag, which a reply
// checks before each token, and writes a byte into a pipe, which wakes the wait for a line (line_input.h).
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

// One user message: a line, continued onto the next while it ends in '\'.
Input read_message(LineInput& in, std::string& message) {
  message.clear();
  std::string line;
  while (true) {
    const Input r = in.next(message.empty() ? "> " : ". ", line);
    if (r == Input::End && !message.empty()) return Input::Line;  // the input ended inside a continuation
    if (r != Input::Line) return r;
    if (!line.empty() && line.back() == '\\') {
      line.back() = '\n';
      message += line;
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
  // Speculative decoding's drafter for sequence 0 (null: none); must outlive the session.
  SequenceDrafter* drafter = nullptr;
  std::optional<bool> enable_thinking;  // -rea on|off; nullopt: the template's default
  int32_t reasoning_budget = -1;        // tokens per reasoning block (-1: no cap)
  std::string reasoning_budget_message;
};

using MediaList = std::vector<MediaItem>;  // a message's images and audio files, in marker order

// The encoders of the mmproj's two sides (either null when the file lacks it; both without --mmproj).
struct ChatEncoders {
  VisionEncoder* vision = nullptr;
  AudioEncoder* audio = nullptr;
  MediaModels models() const {
    return {.vision = vision ? &vision->model() : nullptr, .audio = audio ? &audio->model() : nullptr};
  }
};

// A conversation with one model through its chat template, in sequence 0 of a Context.
// Not thread-safe. The Context, Sampler, template, reverse prompts and the encoders must outlive it.
class ChatSession {
 public:
  ChatSession(Context& ctx, Sampler& sampler, const ModelChatTemplate& chat, const ReversePrompts& stops,
              ChatEncoders encoders, const std::string& system_prompt, ChatOptions options)
      : ctx_(ctx), sampler_(sampler), chat_(chat), stops_(stops), encoders_(encoders), options_(options) {
    if (options_.reasoning_budget >= 0) reasoning_ = chat::detect_chat_syntax(chat_.chat_template).reasoning;
    if (!system_prompt.empty()) add_message("system", system_prompt, {});
    n_fixed_ = messages_.size();
  }

  // A new conversation: only the system prompt stays (its tokens stay cached too).
  void reset() {
    messages_.resize(n_fixed_);
    media_.resize(n_fixed_);
  }

  // The user's message (with its media, placed before its text) and the model's reply, streamed
  // to stdout. Problems with the message (a template error, no room) are reported on stderr and
  // leave the conversation as it was; the error returned is a failed decode, after which the chat
  // cannot go on.
  Status turn(const std::string& user_message, MediaList media) {
    std::string content = with_media_markers(user_message, media.size());
    add_message("user", std::move(content), std::move(media));
    std::string text;  // the rendered conversation
    auto prompt = fit_conversation(text);
    if (!prompt) {
      messages_.pop_back();
      media_.pop_back();
      return {};
    }
    // Decode what the cache does not hold yet; at least the last position, whose logits we need
    // (an image or audio chunk only whole).
    const int64_t n = prompt->n_positions();
    int64_t keep = common_prefix(cached_prompt_, *prompt);
    if (keep == n) {
      const PromptChunk& last_chunk = prompt->chunks.back();
      keep = last_chunk.is_media() ? n - last_chunk.n_positions() : n - 1;
    }
    ctx_.seq_rm(cached_.seq, static_cast<int32_t>(keep), -1);
    const auto t_prompt = Clock::now();
    KILN_ASSIGN_OR_RETURN(const size_t last,
                          decode_media_prompt(ctx_, encoders_.vision, *prompt, keep,
                                              {.seq = cached_.seq, .n_batch = options_.n_batch, .audio = encoders_.audio}));
    const double prompt_s = seconds_since(t_prompt);
    cached_.tokens = prompt->flat_tokens();
    cached_prompt_ = *prompt;
    KILN_TRY(budget_reasoning(text));
    sampler_.reset_history();
    for (int32_t t : cached_.tokens) {
      if (t != kMediaToken) sampler_.accept_prompt(t);
    }

    const auto t_gen = Clock::now();
    if (options_.drafter != nullptr) KILN_TRY(options_.drafter->begin(cached_.tokens));
    Utf8Stream out(stdout);
    KILN_ASSIGN_OR_RETURN(const GenerateResult reply,
                          generate(ctx_, sampler_, ctx_.logits(last), cached_,
                                   {.n_predict = options_.n_predict,
                                    .reverse_prompts = &stops_,
                                    .interrupted = &g_interrupted,
                                    .drafter = options_.drafter},
                                   [&out](int32_t, std::string_view piece) {
                                     out.write(piece);
                                     return true;
                                   }));
    out.finish();
    const double gen_s = seconds_since(t_gen);
    if (options_.drafter != nullptr) {
      n_drafted_ += options_.drafter->n_drafted();
      n_accepted_ += options_.drafter->n_accepted();
      options_.drafter->finish(reply.tokens);
    }
    cached_prompt_.append_text(std::span(cached_.tokens).subspan(static_cast<size_t>(n)));
    std::fputs("\n", stdout);
    std::fflush(stdout);
    clear_interrupt();  // a Ctrl-C from now on is one at the prompt
    if (sampler_.grammar_stalled()) print_error("chat", sampler_.grammar_error());
    if (reply.stop == StopReason::ContextFull) {
      print_error("chat", "the context of " + std::to_string(ctx_.n_ctx()) +
                              " tokens is full: the reply stops here (the oldest turns make room with your "
                              "next message; /reset starts over)");
    } else if (reply.stop == StopReason::Interrupted) {
      print_error("chat", "reply interrupted");
    }
    if (reply.stop == StopReason::Interrupted && reply.text.empty()) {
      messages_.pop_back();  // nothing was said: the turn did not happen
      media_.pop_back();
    } else {
      add_message("assistant", reply.text, {});
      transcript_text_ = text + reply.text;
      transcript_ = *prompt;
      transcript_.append_text(reply.tokens);
    }

    const auto n_new = static_cast<size_t>(n - keep);
    ++n_replies_;
    n_prompt_ += static_cast<int64_t>(n_new);
    n_generated_ += reply.n_generated;
    prompt_s_ += prompt_s;
    gen_s_ += gen_s;
    if (options_.verbose) {
      std::fprintf(stderr,
                   "kiln chat: prompt %zu new tokens (%lld cached) in %.2f s (%.1f t/s), reply %lld tokens in "
                   "%.2f s (%.1f t/s)\n",
                   n_new, static_cast<long long>(keep), prompt_s, static_cast<double>(n_new) / std::max(prompt_s, 1e-9),
                   static_cast<long long>(reply.n_generated), gen_s,
                   static_cast<double>(reply.n_generated) / std::max(gen_s, 1e-9));
      if (options_.drafter != nullptr) print_speculative(options_.drafter->n_drafted(), options_.drafter->n_accepted());
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
    if (options_.drafter != nullptr) print_speculative(n_drafted_, n_accepted_);
  }

 private:
  static void print_speculative(int64_t drafted, int64_t accepted) {
    std::fprintf(stderr, "kiln chat: speculative: drafted %lld, accepted %lld\n", static_cast<long long>(drafted),
                 static_cast<long long>(accepted));
  }

  void add_message(std::string role, std::string content, MediaList media) {
    messages_.push_back(chat_message(std::move(role), std::move(content)));
    media_.push_back(std::move(media));
  }

  // The conversation's tokens and media, with the generation prompt.
  // When the rendering begins with the transcript's text, its tokens are the transcript's followed
  // by those of the rest of the text (so a reply's sampled tokens stay as they were), else the
  // whole rendering's. `text` (optional) gets the rendered text.
  Result<MediaPrompt> render(const std::vector<ChatMessage>& messages, const std::vector<MediaList>& media,
                             std::string* text = nullptr) const {
    KILN_ASSIGN_OR_RETURN(const std::string rendered, render_text(messages, /*add_generation_prompt=*/true));
    if (text) *text = rendered;
    const auto& tok = ctx_.model().tokenizer();
    MediaList all;
    for (const MediaList& l : media) all.insert(all.end(), l.begin(), l.end());
    const bool continues = !transcript_text_.empty() && rendered.starts_with(transcript_text_) &&
                           transcript_.n_media() <= all.size();
    const std::string_view rest =
        continues ? std::string_view(rendered).substr(transcript_text_.size()) : rendered;
    MediaPrompt p = continues ? transcript_ : MediaPrompt();
    if (encoders_.vision == nullptr && encoders_.audio == nullptr) {
      p.append_text(continues ? tok.tokenize(rest, /*add_special=*/false, /*parse_special=*/true)
                              : serve::tokenize_chat(tok, rendered));
      return p;
    }
    const std::span<const MediaItem> rest_media = std::span(all).subspan(continues ? transcript_.n_media() : 0);
    KILN_ASSIGN_OR_RETURN(MediaPrompt more, tokenize_media_prompt(tok, encoders_.models(), rest, rest_media,
                                                                  {.add_special = !continues,
                                                                   .parse_special = true,
                                                                   .collapse_bos = !continues}));
    for (PromptChunk& c : more.chunks) {
      if (c.is_media())
        p.chunks.push_back(std::move(c));
      else
        p.append_text(c.tokens);
    }
    return p;
  }

  // The conversation rendered through the template (with -rea's enable_thinking).
  Result<std::string> render_text(const std::vector<ChatMessage>& messages, bool add_generation_prompt) const {
    ChatRenderOptions ro;
    ro.messages = messages;
    ro.add_generation_prompt = add_generation_prompt;
    ro.bos_token = chat_.bos_text;
    ro.eos_token = chat_.eos_text;
    if (options_.enable_thinking) ro.extra_context["enable_thinking"] = *options_.enable_thinking;
    return chat_.chat_template.render(ro);
  }

  // With --reasoning-budget and a template whose model reasons: the sampler caps this reply's
  // reasoning blocks, counting from the generation prompt's own start tag (`rendered`: this
  // turn's prompt text), as kiln serve and llama-cli do.
  Status budget_reasoning(const std::string& rendered) {
    if (options_.reasoning_budget < 0 || !reasoning_.supported()) return {};
    KILN_ASSIGN_OR_RETURN(const std::string without, render_text(messages_, /*add_generation_prompt=*/false));
    const auto spec = reasoning_budget_spec(ctx_.model().tokenizer(), chat::trim(reasoning_.start),
                                            chat::trim(reasoning_.end), options_.reasoning_budget_message,
                                            options_.reasoning_budget, chat::generation_prompt_text(without, rendered));
    sampler_.set_reasoning_budget(
        spec ? std::make_unique<ReasoningBudget>(*spec, token_ends_utf8(ctx_.model().tokenizer())) : nullptr);
    return {};
  }

  // Tokens the reply may need: -n, or a quarter of the context when -n is -1; at least 1, at most
  // half the context.
  int64_t reply_room() const {
    const int64_t n_ctx = ctx_.n_ctx();
    const int64_t want = options_.n_predict >= 0 ? options_.n_predict : n_ctx / 4;
    return std::max<int64_t>(1, std::min(want, n_ctx / 2));
  }

  // The prompt of the conversation, after dropping its oldest turns (never the system prompt nor
  // the last message) until it leaves reply_room() free. Nullopt, with the reason on stderr, when
  // the template fails or the last message does not fit even alone; the conversation is then as it
  // was.
  std::optional<MediaPrompt> fit_conversation(std::string& text) {
    const int64_t limit = ctx_.n_ctx() - reply_room();
    auto prompt = render(messages_, media_, &text);
    if (!prompt.ok()) {
      std::fprintf(stderr, "kiln chat: %s\n", prompt.error().message.c_str());
      return std::nullopt;
    }
    if (prompt->n_positions() <= limit) return std::move(*prompt);
    const auto n_fixed = static_cast<std::ptrdiff_t>(n_fixed_);
    std::vector<ChatMessage> alone(messages_.begin(), messages_.begin() + n_fixed);
    std::vector<MediaList> alone_media(media_.begin(), media_.begin() + n_fixed);
    alone.push_back(messages_.back());
    alone_media.push_back(media_.back());
    auto alone_prompt = render(alone, alone_media);
    if (!alone_prompt.ok() || alone_prompt->n_positions() > limit) {
      if (!alone_prompt.ok()) {
        std::fprintf(stderr, "kiln chat: %s\n", alone_prompt.error().message.c_str());
      } else {
        std::fprintf(stderr,
                     "kiln chat: this message makes a prompt of %lld tokens%s, which leaves no room for a "
                     "reply of %lld tokens in the context of %lld (raise -c, or send a shorter message)\n",
                     static_cast<long long>(alone_prompt->n_positions()), n_fixed_ > 0 ? " with the system prompt" : "",
                     static_cast<long long>(reply_room()), static_cast<long long>(ctx_.n_ctx()));
      }
      return std::nullopt;
    }
    // Drop whole turns: from the first message after the system prompt up to the next user message.
    std::vector<ChatMessage> kept = messages_;
    std::vector<MediaList> kept_media = media_;
    size_t n_dropped = 0;
    while (prompt->n_positions() > limit) {
      do {
        kept.erase(kept.begin() + n_fixed);
        kept_media.erase(kept_media.begin() + n_fixed);
        ++n_dropped;
      } while (kept.begin() + n_fixed + 1 != kept.end() && kept[n_fixed_].role != "user");
      prompt = render(kept, kept_media, &text);
      if (!prompt.ok()) {
        std::fprintf(stderr, "kiln chat: %s\n", prompt.error().message.c_str());
        return std::nullopt;
      }
    }
    messages_ = std::move(kept);
    media_ = std::move(kept_media);
    std::fprintf(stderr,
                 "kiln chat: the conversation no longer fits the context of %lld tokens: dropped the %zu "
                 "oldest messages (the system prompt stays; /reset starts over)\n",
                 static_cast<long long>(ctx_.n_ctx()), n_dropped);
    return std::move(*prompt);
  }

  Context& ctx_;
  Sampler& sampler_;
  const ModelChatTemplate& chat_;
  const ReversePrompts& stops_;
  ChatEncoders encoders_;
  ChatOptions options_;
  chat::ReasoningSyntax reasoning_;  // the template's reasoning tags, with --reasoning-budget
  std::vector<ChatMessage> messages_;
  std::vector<MediaList> media_;  // per message, in marker order
  size_t n_fixed_ = 0;             // leading messages never dropped (the system prompt)
  SequenceState cached_;           // what sequence 0 of the KV cache holds (kMediaToken at image positions)
  MediaPrompt cached_prompt_;      // the same as a prompt, images whole
  // The last turn's prompt and reply: their text as rendered and streamed, their tokens as decoded
  // and sampled (the reply's last token may not be in the cache yet).
  std::string transcript_text_;
  MediaPrompt transcript_;
  int64_t n_replies_ = 0, n_prompt_ = 0, n_generated_ = 0, n_drafted_ = 0, n_accepted_ = 0;
  double prompt_s_ = 0, gen_s_ = 0;
};

// The argument of `command` when `message` is that command ("/image cat.png": "cat.png", without
// the spaces around it; "/image": ""); nullopt when it is not.
std::optional<std::string> command_argument(const std::string& message, std::string_view command) {
  if (!message.starts_with(command)) return std::nullopt;
  std::string arg = message.substr(command.size());
  if (!arg.empty() && arg[0] != ' ' && arg[0] != '\t') return std::nullopt;
  arg.erase(0, arg.find_first_not_of(" \t"));
  arg.erase(arg.find_last_not_of(" \t") + 1);
  return arg;
}

constexpr const char* kHelp =
    "  /exit        end the chat (also Ctrl-D, or Ctrl-C at the prompt)\n"
    "  /reset       start a new conversation (the system prompt stays)\n"
    "  /image FILE  attach a PNG or JPEG image to your next message (needs --mmproj)\n"
    "  /audio FILE  attach a WAV, FLAC or MP3 file to your next message (needs an --mmproj with audio)\n"
    "  /help        this list\n"
    "  A line ending in '\\' continues the message on the next line. Ctrl-C stops a reply.\n";

int run_chat(int argc, char** argv) {
  ModelFlags mf;
  MediaFlags media;
  SamplerFlags sf;
  SpeculativeFlags spf;
  ReasoningFlags reasoning;
  std::string system_prompt, prompt, template_file;
  std::vector<std::string> reverse_prompts;
  ChatOptions co;
  bool single_turn = false;
  OptionParser p("chat", "kiln chat [-m MODEL.gguf] [-sys TEXT] [-p TEXT [-st]] [-n N] [options]");
  p.description(
      "Talks with a model through its chat template. Type a message and press Enter; a line ending in\n"
      "'\\' continues on the next. On a terminal, lines can be edited and Up/Down recall this session's\n"
      "lines. Replies stream to stdout; the prompt, notices and timings go to stderr. Messages can be\n"
      "piped into stdin, one per line. Commands: /exit (or Ctrl-D), /reset, /help. Ctrl-C stops a reply;\n"
      "at the prompt it ends the chat (exit code 130).");
  mf.declare(p);
  p.value({"-sys", "--system-prompt"}, &system_prompt, "TEXT", "the system message of the conversation");
  p.value({"-p", "--prompt"}, &prompt, "TEXT",
          "the first user message (then the chat goes on, unless --single-turn)");
  p.flag({"-st", "--single-turn"}, &single_turn, "answer one message (-p, or the first line read) and exit");
  p.value({"-n", "--n-predict"}, &co.n_predict, "N", "most tokens per reply (default -1: until end of text)",
          IntRange::at_least(-1));
  p.value({"-r", "--reverse-prompt"}, &reverse_prompts, "TEXT",
          "end the reply when it ends with TEXT and return to the prompt (repeatable)");
  p.value({"--chat-template-file"}, &template_file, "FILE",
          "Jinja chat template to use instead of the model's (default: the model's, else ChatML)");
  p.flag({"-v", "--verbose"}, &co.verbose, "print the template's origin and timings after every reply");
  media.declare(p, /*audio=*/true);
  sf.declare(p);
  spf.declare(p);
  reasoning.declare(p);
  if (auto code = p.parse(argc, argv)) return *code;
  if (auto code = mf.list_devices_if_asked("chat")) return *code;
  const auto enable_thinking = reasoning.enable_thinking();
  if (!enable_thinking.ok()) return fail("chat", enable_thinking.error().message, 2);
  co.enable_thinking = *enable_thinking;
  co.reasoning_budget = reasoning.budget;
  co.reasoning_budget_message = reasoning.budget_message;
  co.n_batch = mf.context.n_batch;
  std::string template_source;
  if (!template_file.empty()) {
    auto text = read_text_file(template_file);
    if (!text.ok()) return fail("chat", "--chat-template-file: " + text.error().message);
    template_source = std::move(*text);
    if (template_source.empty())
      return fail("chat", "--chat-template-file: '" + template_file + "' is empty");
  }

  auto model = mf.load_model("chat");
  if (!model) return 1;
  if (auto code = mf.fit_print_if_asked("chat", model)) return *code;
  auto chat = choose_chat_template(*model, template_source);
  if (!chat.ok()) return fail("chat", chat.error().message);
  if (co.verbose) std::fprintf(stderr, "kiln chat: chat template: %s\n", chat->origin.c_str());
  auto sampler = sf.make_sampler(*model, "chat");
  if (!sampler) return 1;
  auto mmproj = media.load_declared(*model);
  if (!mmproj.ok()) return fail("chat", mmproj.error().message);
  mf.context.input_embeddings = mmproj->vision || mmproj->audio;
  // The decoder and the encoders take turns on the context's compute arena.
  if (spf.requested() && mf.context.input_embeddings)
    return fail("chat", "speculative decoding is not supported with images or audio (--mmproj)");
  auto mc = mf.create_context("chat", model, mf.context);
  if (!mc) return 1;
  ContextOptions target_options = mf.context;
  target_options.n_ctx = mc->context->n_ctx();
  bool spec_failed = false;
  const auto speculator =
      spf.make(*model, mf, *mc, target_options, "chat", &spec_failed);
  if (spec_failed) return 1;
  const auto drafter = speculator ? speculator->drafter(0) : nullptr;
  co.drafter = drafter.get();
  std::unique_ptr<VisionEncoder> encoder;
  std::unique_ptr<AudioEncoder> audio_encoder;
  if (mmproj->vision) {
    auto enc = media.vision_encoder(mmproj->vision, *mc, mf.context, mf.weight_options("chat"));
    if (!enc.ok()) return fail("chat", enc.error().message);
    encoder = std::move(*enc);
  }
  if (mmproj->audio) {
    auto enc = media.audio_encoder(mmproj->audio, *mc, mf.context, mf.weight_options("chat"));
    if (!enc.ok()) return fail("chat", enc.error().message);
    audio_encoder = std::move(*enc);
  }
  auto first_media = media.read_media(mmproj->vision.get(), mmproj->audio.get());
  if (!first_media.ok()) return fail("chat", first_media.error().message);
  MediaList pending = std::move(*first_media);  // media for the next message
  if (!install_interrupt_handler())
    return fail("chat", std::string("cannot install the Ctrl-C handler: ") + std::strerror(errno));

  const ReversePrompts stops(model->tokenizer(), reverse_prompts, /*slack=*/0);
  ChatSession session(*mc->context, *sampler, *chat, stops, {.vision = encoder.get(), .audio = audio_encoder.get()},
                      system_prompt, co);
  const std::unique_ptr<LineInput> in = LineInput::open(g_interrupt_pipe[0]);
  const bool tty = in->is_terminal();
  if (tty) std::fprintf(stderr, "kiln chat: /help lists the commands; /exit or Ctrl-D ends the chat\n");
  int exit_code = 0;
  auto reply = [&](const std::string& message) {
    const Status st = session.turn(message, std::exchange(pending, {}));
    if (st.ok()) return true;
    print_error("chat", st.error().message);
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
    const Input r = read_message(*in, message);
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
      pending.clear();
      std::fprintf(stderr, "kiln chat: new conversation\n");
      continue;
    }
    if (const std::optional<std::string> path = command_argument(message, "/image")) {
      if (!encoder) {
        std::fprintf(stderr, "kiln chat: /image needs an --mmproj FILE with a vision encoder (the model's projector)\n");
      } else if (path->empty()) {
        std::fprintf(stderr, "kiln chat: /image needs a file name\n");
      } else if (auto img = read_image(encoder->model(), *path); !img.ok()) {
        std::fprintf(stderr, "kiln chat: /image: %s\n", img.error().message.c_str());
      } else {
        MediaItem item;
        item.image = *img;
        pending.push_back(std::move(item));
        std::fprintf(stderr, "kiln chat: image '%s' (%d x %d, %lld tokens) goes with your next message\n",
                     path->c_str(), (*img)->source_width, (*img)->source_height,
                     static_cast<long long>((*img)->n_tokens));
      }
      continue;
    }
    if (const std::optional<std::string> path = command_argument(message, "/audio")) {
      if (!audio_encoder) {
        std::fprintf(stderr, "kiln chat: /audio needs an --mmproj FILE with an audio encoder (the model's projector)\n");
      } else if (path->empty()) {
        std::fprintf(stderr, "kiln chat: /audio needs a file name\n");
      } else if (auto chunks = read_audio(audio_encoder->model(), *path, media.max_audio_seconds); !chunks.ok()) {
        std::fprintf(stderr, "kiln chat: /audio: %s\n", chunks.error().message.c_str());
      } else {
        int64_t n_tokens = 0;
        for (const auto& c : *chunks) n_tokens += c->n_tokens;
        std::fprintf(stderr, "kiln chat: audio '%s' (%lld tokens) goes with your next message\n", path->c_str(),
                     static_cast<long long>(n_tokens));
        MediaItem item;
        item.audio = std::move(*chunks);
        pending.push_back(std::move(item));
      }
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
  if (speculator) {
    if (const Status st = speculator->save_lookup_cache(); !st.ok()) {
      print_error("chat", st.error().message);
      exit_code = 1;
    }
  }
  return exit_code;
}

}  // namespace

KILN_COMMAND(chat, "talk with a model in the terminal, through its chat template", run_chat);

}  // namespace kiln::cli
