// `kiln chat` as a child process on the qwen2 fixture (which has a chat template), messages piped
// into stdin: every reply must equal the greedy continuation a Context gives directly for the
// template rendering of the conversation so far, as the server's tests check the routes. Also
// the grammar and JSON-schema flags that `kiln run` and `kiln chat` share.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <pty.h>
#include <signal.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include <cctype>
#include <chrono>
#include <cstdio>
#include <utility>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "greedy_reference.h"
#include "llm/model.h"
#include "serve/completion_request.h"
#include "test_data.h"
#include "text/chat_template.h"

namespace kiln {
namespace {

const std::string kModel = kiln::test_data::path("models/qwen2-e64-Q8_0.gguf");
const std::string kKiln = KILN_BINARY_DIR "/kiln";

std::shared_ptr<const Model> model() {
  static auto m = Model::load(kModel);
  EXPECT_TRUE(m.ok()) << (m.ok() ? "" : m.error().message);
  return *m;
}

ChatMessage msg(std::string role, std::string content) {
  ChatMessage m;
  m.role = std::move(role);
  m.content = std::move(content);
  return m;
}

// The conversation as the model's template (or `source`) renders it, with the vocabulary's BOS/EOS
// texts and the generation prompt.
std::string render_text(const std::vector<ChatMessage>& messages, const std::string& source = "") {
  const auto& tok = model()->tokenizer();
  auto tmpl =
      ChatTemplate::parse(source.empty() ? *model()->file().get_string("tokenizer.chat_template") : source);
  EXPECT_TRUE(tmpl.ok());
  ChatRenderOptions ro;
  ro.messages = messages;
  ro.add_generation_prompt = true;
  if (tok.bos() >= 0) ro.bos_token = *tok.token_to_piece(tok.bos(), true);
  if (tok.eos() >= 0) ro.eos_token = *tok.token_to_piece(tok.eos(), true);
  auto text = tmpl->render(ro);
  EXPECT_TRUE(text.ok()) << (text.ok() ? "" : text.error().message);
  return text.ok() ? *text : std::string();
}

// The conversation's prompt tokens, the whole rendering tokenized as `kiln serve` does.
std::vector<int32_t> prompt_tokens(const std::vector<ChatMessage>& messages, const std::string& source = "") {
  return serve::tokenize_chat(model()->tokenizer(), render_text(messages, source));
}

// The prompt tokens of the turn after `before` got the greedy `reply`, as kiln chat builds them:
// the earlier prompt's tokens, the reply's tokens as sampled, then the rest of the rendering's.
std::vector<int32_t> next_turn_tokens(const std::vector<ChatMessage>& before,
                                      const std::vector<test::GreedyStep>& reply,
                                      const std::vector<ChatMessage>& messages) {
  const std::string earlier = render_text(before) + test::text_of(reply);
  const std::string text = render_text(messages);
  EXPECT_TRUE(text.starts_with(earlier)) << text;
  std::vector<int32_t> ids = prompt_tokens(before);
  for (const auto& step : reply) ids.push_back(step.token);
  const auto rest = model()->tokenizer().tokenize(text.substr(earlier.size()), false, true);
  ids.insert(ids.end(), rest.begin(), rest.end());
  return ids;
}

// The greedy reply (at most n tokens, up to an end-of-generation token) straight from a Context.
std::string direct_greedy(const std::vector<int32_t>& ids, int n) {
  return test::text_of(test::greedy_reference(model(), ids, n));
}

std::string read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

struct ChatRun {
  int exit_code = -1;
  std::string out, err;
};

// Runs `kiln COMMAND ARGS` with `input` on stdin (a file, not a terminal).
ChatRun run_kiln(const char* command, const std::vector<std::string>& args, const std::string& input) {
  const std::string base = std::string(KILN_BINARY_DIR) + "/chat_cli_test." + std::to_string(getpid());
  const std::string in_path = base + ".in", out_path = base + ".out", err_path = base + ".err";
  std::ofstream(in_path, std::ios::binary) << input;
  ChatRun r;
  const pid_t pid = fork();
  if (pid == 0) {
    if (!std::freopen(in_path.c_str(), "rb", stdin) || !std::freopen(out_path.c_str(), "wb", stdout) ||
        !std::freopen(err_path.c_str(), "wb", stderr))
      _exit(126);
    std::vector<char*> argv{const_cast<char*>(kKiln.c_str()), const_cast<char*>(command)};
    for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    execv(kKiln.c_str(), argv.data());
    _exit(127);
  }
  EXPECT_GT(pid, 0);
  int status = 0;
  EXPECT_EQ(waitpid(pid, &status, 0), pid);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  r.out = read_all(out_path);
  r.err = read_all(err_path);
  for (const auto& p : {in_path, out_path, err_path}) std::remove(p.c_str());
  return r;
}

ChatRun run_chat(const std::vector<std::string>& args, const std::string& input) {
  return run_kiln("chat", args, input);
}

// Greedy, 8 tokens per reply, one thread, the context the reference uses.
std::vector<std::string> greedy_args(std::vector<std::string> more = {}) {
  std::vector<std::string> a{"-m", kModel, "--temp", "0", "-n", "8", "-t", "1", "-c", "1024", "-s", "1"};
  a.insert(a.end(), more.begin(), more.end());
  return a;
}

const std::string kUser1 = "Hello! What is a kiln?";
const std::string kUser2 = "And how hot does it get?";

// The numbers of the verbose line "kiln chat: prompt N new tokens (M cached) ..., reply K tokens"
// of the `turn`th reply (0-based) in `err`.
struct TurnCounts {
  int n_new = -1, n_cached = -1, n_reply = -1;
};
TurnCounts turn_counts(const std::string& err, int turn) {
  size_t at = std::string::npos;
  for (int i = 0; i <= turn; ++i) {
    at = err.find("kiln chat: prompt ", at == std::string::npos ? 0 : at + 1);
    if (at == std::string::npos) return {};
  }
  TurnCounts c;
  std::sscanf(err.c_str() + at, "kiln chat: prompt %d new tokens (%d cached)", &c.n_new, &c.n_cached);
  const size_t reply = err.find(", reply ", at);
  if (reply != std::string::npos) std::sscanf(err.c_str() + reply, ", reply %d tokens", &c.n_reply);
  return c;
}

TEST(ChatCommand, TwoTurnsFollowTheTemplateAndResetStartsOver) {
  const std::vector<ChatMessage> turn1 = {msg("user", kUser1)};
  const auto steps1 = test::greedy_reference(model(), prompt_tokens(turn1), 8);
  const std::string reply1 = test::text_of(steps1);
  const std::vector<ChatMessage> turn2 = {msg("user", kUser1), msg("assistant", reply1), msg("user", kUser2)};
  const std::string reply2 = direct_greedy(next_turn_tokens(turn1, steps1, turn2), 8);
  ASSERT_FALSE(reply1.empty());
  ASSERT_FALSE(reply2.empty());
  const ChatRun r = run_chat(greedy_args({"--verbose"}),
                             kUser1 + "\n" + kUser2 + "\n/reset\n" + kUser1 + "\n/exit\n" + "never read\n");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, reply1 + "\n" + reply2 + "\n" + reply1 + "\n") << r.err;
  EXPECT_NE(r.err.find("new conversation"), std::string::npos) << r.err;
  // The second turn decodes only what follows the first turn: all of its prompt and reply is
  // cached but the reply's last token, sampled when -n 8 was reached.
  const TurnCounts first = turn_counts(r.err, 0), second = turn_counts(r.err, 1);
  ASSERT_EQ(first.n_reply, 8) << r.err;
  EXPECT_EQ(second.n_cached, first.n_new + first.n_cached + first.n_reply - 1) << r.err;
  EXPECT_EQ(second.n_cached + second.n_new, static_cast<int>(next_turn_tokens(turn1, steps1, turn2).size()));
  EXPECT_NE(r.err.find("kiln chat: 3 replies;"), std::string::npos) << r.err;
}

// The "kiln chat: speculative: drafted N, accepted M" totals line; {-1, -1} when missing.
std::pair<long long, long long> speculative_totals(const std::string& err) {
  std::pair<long long, long long> n{-1, -1};
  const size_t at = err.rfind("kiln chat: speculative: ");
  if (at != std::string::npos)
    std::sscanf(err.c_str() + at, "kiln chat: speculative: drafted %lld, accepted %lld", &n.first, &n.second);
  return n;
}

// With speculative decoding (the model drafting for itself; n-gram drafts) the replies are those
// of the chat without: greedy over two turns, and the first reply at temperature 0.8.
TEST(ChatCommand, SpeculativeDecodingGivesTheSameReplies) {
  const std::string input = kUser1 + "\n" + kUser2 + "\n";
  const ChatRun plain = run_chat(greedy_args({"-n", "16"}), input);
  ASSERT_EQ(plain.exit_code, 0) << plain.err;
  EXPECT_EQ(speculative_totals(plain.err).first, -1) << plain.err;
  for (const std::vector<std::string>& spec :
       {std::vector<std::string>{"-md", kModel, "--spec-draft-n-max", "4"},
        std::vector<std::string>{"--spec-type", "ngram-simple", "--spec-ngram-simple-size-n", "2"}}) {
    std::vector<std::string> args = greedy_args({"-n", "16"});
    args.insert(args.end(), spec.begin(), spec.end());
    const ChatRun r = run_chat(args, input);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(r.out, plain.out) << spec[0];
    const auto [drafted, accepted] = speculative_totals(r.err);
    if (spec[0] == "-md") {
      EXPECT_GT(drafted, 0) << r.err;
    }
    EXPECT_GE(drafted, accepted) << r.err;
    EXPECT_GE(accepted, 0) << r.err;
  }
  // Sampled: one reply (a later turn's sampling continues the random stream, which a reply that
  // ended inside a verified draft has moved on; see the README).
  std::vector<std::string> sampled{"-m", kModel, "--temp", "0.8", "-n", "16", "-t", "1", "-c", "1024", "-s", "5"};
  const ChatRun plain_sampled = run_chat(sampled, kUser1 + "\n");
  sampled.insert(sampled.end(), {"-md", kModel});
  const ChatRun spec_sampled = run_chat(sampled, kUser1 + "\n");
  ASSERT_EQ(spec_sampled.exit_code, 0) << spec_sampled.err;
  EXPECT_EQ(spec_sampled.out, plain_sampled.out);
  EXPECT_GT(speculative_totals(spec_sampled.err).first, 0) << spec_sampled.err;
}

// -r ends a reply where its text ends with the reverse prompt, and the chat goes on.
TEST(ChatCommand, ReversePromptEndsTheReply) {
  const std::vector<ChatMessage> turn1 = {msg("user", kUser1)};
  const auto steps = test::greedy_reference(model(), prompt_tokens(turn1), 8);
  ASSERT_EQ(steps.size(), 8u);
  const std::vector<std::string> pieces = test::pieces_of(steps);
  const std::string stop = pieces[2] + pieces[3];
  ASSERT_FALSE(stop.empty());
  // Where kiln must stop: the first token after which the prompt and reply text end with `stop`.
  std::string text = render_text(turn1), reply;
  for (const std::string& piece : pieces) {
    text += piece;
    reply += piece;
    if (text.ends_with(stop)) break;
  }
  const ChatRun r =
      run_chat(greedy_args({"-r", stop, "--reverse-prompt", "never said"}), kUser1 + "\n" + kUser2 + "\n");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(r.out.starts_with(reply + "\n")) << "stop '" << stop << "'\n" << r.out;
  EXPECT_NE(r.err.find("kiln chat: 2 replies;"), std::string::npos) << r.err;
}

TEST(ChatCommand, SingleTurnAnswersThePromptAndExits) {
  const std::string reply1 = direct_greedy(prompt_tokens({msg("user", kUser1)}), 8);
  const ChatRun r = run_chat(greedy_args({"-p", kUser1, "--single-turn"}), kUser2 + "\n");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, reply1 + "\n") << r.err;
}

TEST(ChatCommand, SystemPromptAndContinuedLines) {
  const std::string system = "You answer in one word.";
  const std::string expect =
      direct_greedy(prompt_tokens({msg("system", system), msg("user", "first line\nsecond line")}), 8);
  const ChatRun r = run_chat(greedy_args({"-sys", system}), "first line\\\nsecond line\n");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, expect + "\n") << r.err;
}

TEST(ChatCommand, TemplateFileOverridesTheModels) {
  const std::string source =
      "{%- for m in messages %}[{{ m.role }}] {{ m.content }}\n{% endfor -%}"
      "{%- if add_generation_prompt %}[assistant] {% endif -%}";
  const std::string path =
      std::string(KILN_BINARY_DIR) + "/chat_cli_test." + std::to_string(getpid()) + ".jinja";
  std::ofstream(path, std::ios::binary) << source;
  const auto ids = prompt_tokens({msg("user", kUser1)}, source);
  ASSERT_NE(ids, prompt_tokens({msg("user", kUser1)}));
  const ChatRun r = run_chat(greedy_args({"--chat-template-file", path, "-v"}), kUser1 + "\n");
  std::remove(path.c_str());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, direct_greedy(ids, 8) + "\n") << r.err;
  EXPECT_NE(r.err.find("chat template: the given template"), std::string::npos) << r.err;

  const ChatRun missing = run_chat(greedy_args({"--chat-template-file", path}), kUser1 + "\n");
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_NE(missing.err.find("cannot read '" + path + "'"), std::string::npos) << missing.err;
}

// -rea and --reasoning-budget on a ChatML template whose generation prompt opens "<think>" (the
// one tests/server/reasoning_test.cpp serves): the budget forces the end tag as kiln serve does
// for the same request (whose answers there are llama-server's), and -rea off renders the
// template's closed block.
TEST(ChatCommand, ReasoningBudgetAndThinkingSwitchAsTheServer) {
  const std::string think =
      "{%- for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
      "{%- if add_generation_prompt %}<|im_start|>assistant\n"
      "{% if enable_thinking is defined and not enable_thinking %}<think>\n\n</think>\n\n{% else %}<think>{% endif %}"
      "{%- endif %}";
  const std::string path =
      std::string(KILN_BINARY_DIR) + "/chat_cli_reasoning." + std::to_string(getpid()) + ".jinja";
  std::ofstream(path, std::ios::binary) << think;
  auto chat = [&](std::vector<std::string> more) {
    more.insert(more.begin(), {"--chat-template-file", path, "-p", "hi", "-st"});
    return run_chat(greedy_args(more), "");
  };
  const ChatRun three = chat({"--reasoning-budget", "3"});
  EXPECT_EQ(three.out, "옵scriptId Canal</think>[PAD151904]最も\n") << three.err;
  const ChatRun zero = chat({"--reasoning-budget", "0", "--reasoning-budget-message", " Enough."});
  EXPECT_EQ(zero.out, " Enough.</think> racially insensitiveドラマ\n") << zero.err;
  const ChatRun free = chat({});
  EXPECT_EQ(free.out, chat({"--reasoning-budget", "-1"}).out);
  EXPECT_EQ(free.out.find("</think>"), std::string::npos) << free.out;
  // -rea off: the generation prompt the template writes without thinking.
  const std::string off_source =
      "{%- for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
      "{%- if add_generation_prompt %}<|im_start|>assistant\n<think>\n\n</think>\n\n{% endif %}";
  const ChatRun off = chat({"-rea", "off"});
  EXPECT_EQ(off.out, direct_greedy(prompt_tokens({msg("user", "hi")}, off_source), 8) + "\n") << off.err;
  EXPECT_NE(off.out, free.out);
  const ChatRun bad = chat({"-rea", "maybe"});
  std::remove(path.c_str());
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.err.find("kiln chat: --reasoning: 'maybe' is not on, off or auto"), std::string::npos) << bad.err;
}

// A 64-token context with 8 tokens kept for each reply: the second turn no longer fits, so the
// first turn goes; a message too long even alone is refused and the chat goes on.
TEST(ChatCommand, OverflowDropsTheOldestTurnAndGoesOn) {
  const std::string u1 = "Hi.";
  const std::string u2 = "Tell me about kilns, ovens and furnaces for pottery, bricks and glass, please.";
  std::string too_long;
  for (int i = 0; i < 40; ++i) too_long += "word ";
  const std::string reply1 = direct_greedy(prompt_tokens({msg("user", u1)}), 8);
  const size_t limit = 64 - 8;
  ASSERT_LE(prompt_tokens({msg("user", u1)}).size(), limit);
  ASSERT_GT(prompt_tokens({msg("user", u1), msg("assistant", reply1), msg("user", u2)}).size(), limit);
  ASSERT_LE(prompt_tokens({msg("user", u2)}).size(), limit);
  ASSERT_GT(prompt_tokens({msg("user", too_long)}).size(), limit);
  const std::string reply2 = direct_greedy(prompt_tokens({msg("user", u2)}), 8);

  std::vector<std::string> args = greedy_args();
  args[9] = "64";  // -c
  const ChatRun r = run_chat(args, u1 + "\n" + u2 + "\n" + too_long + "\n/reset\n" + u1 + "\n");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, reply1 + "\n" + reply2 + "\n" + reply1 + "\n") << r.err;
  EXPECT_NE(r.err.find("no longer fits the context of 64 tokens: dropped the 2 oldest messages"),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("leaves no room for a reply of 8 tokens in the context of 64"), std::string::npos)
      << r.err;
}

// Without -n a reply runs until the context is full, says so, and the chat goes on.
TEST(ChatCommand, ReplyStopsWhenTheContextIsFull) {
  constexpr size_t kCtx = 48;
  const std::string u1 = "Hi.";
  const auto ids = prompt_tokens({msg("user", u1)});
  ASSERT_LE(ids.size(), kCtx - kCtx / 4);  // a quarter of the context is kept for the reply
  // Streamed tokens: each is decoded before the next, until every cell is full.
  const std::string reply = direct_greedy(ids, static_cast<int>(kCtx - ids.size() + 1));
  std::vector<std::string> args = greedy_args();
  args[5] = "-1";                  // -n
  args[9] = std::to_string(kCtx);  // -c
  const ChatRun r = run_chat(args, u1 + "\n/reset\n" + u1 + "\n");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, reply + "\n" + reply + "\n") << r.err;
  EXPECT_NE(r.err.find("the context of " + std::to_string(kCtx) + " tokens is full: the reply stops here"),
            std::string::npos)
      << r.err;
}

// `kiln chat ARGS` as a child process with pipes for stdin, stdout and stderr, for tests that act
// while it runs (signals, messages written after a reply started). Kills it if a test fails early.
class ChatProcess {
 public:
  explicit ChatProcess(const std::vector<std::string>& args) {
    int in[2], out[2], err[2];
    if (pipe(in) != 0 || pipe(out) != 0 || pipe(err) != 0) return;
    pid_ = fork();
    if (pid_ == 0) {
      dup2(in[0], 0);
      dup2(out[1], 1);
      dup2(err[1], 2);
      for (int fd : {in[0], in[1], out[0], out[1], err[0], err[1]}) close(fd);
      std::vector<char*> argv{const_cast<char*>(kKiln.c_str()), const_cast<char*>("chat")};
      for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
      argv.push_back(nullptr);
      execv(kKiln.c_str(), argv.data());
      _exit(127);
    }
    close(in[0]);
    close(out[1]);
    close(err[1]);
    in_ = in[1];
    out_ = out[0];
    log_ = fdopen(err[0], "r");
  }
  ~ChatProcess() {
    if (pid_ > 0 && !reaped_) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
    if (log_ != nullptr) std::fclose(log_);
    if (in_ >= 0) close(in_);
    if (out_ >= 0) close(out_);
  }
  bool started() const { return pid_ > 0 && log_ != nullptr; }
  pid_t pid() const { return pid_; }

  bool send(const std::string& text) {
    return write(in_, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  }
  // Waits until a reply has started to stream: a byte on stdout after what was there (call it once
  // stderr has shown that the previous reply ended).
  bool reply_started() {
    char buf[4096];
    const int flags = fcntl(out_, F_GETFL);
    fcntl(out_, F_SETFL, flags | O_NONBLOCK);
    while (read(out_, buf, sizeof buf) > 0) {
    }
    fcntl(out_, F_SETFL, flags);
    return read(out_, buf, 1) == 1;
  }
  // Reads stderr up to the line that contains `text`; that line, or "" at the end of stderr.
  std::string wait_for(const char* text) {
    char line[1024];
    while (std::fgets(line, sizeof line, log_)) {
      if (std::strstr(line, text)) return line;
    }
    return "";
  }
  // The exit status (as waitpid gives it).
  int wait_exit() {
    int status = 0;
    EXPECT_EQ(waitpid(pid_, &status, 0), pid_);
    reaped_ = true;
    return status;
  }

 private:
  pid_t pid_ = -1;
  int in_ = -1, out_ = -1;
  FILE* log_ = nullptr;
  bool reaped_ = false;
};

std::vector<std::string> long_reply_args(std::vector<std::string> more = {}) {
  std::vector<std::string> a{"-m", kModel, "--temp", "0",    "-n", "400", "--ignore-eos",
                             "-t", "1",    "-c",     "1024", "-s", "1"};
  a.insert(a.end(), more.begin(), more.end());
  return a;
}

// Ctrl-C during a reply stops it and the chat goes on; Ctrl-C at the prompt ends the chat (130).
TEST(ChatCommand, CtrlCStopsAReplyThenEndsTheChat) {
  ChatProcess chat(long_reply_args());
  ASSERT_TRUE(chat.started());
  ASSERT_TRUE(chat.send(kUser1 + "\n"));
  ASSERT_TRUE(chat.reply_started());
  kill(chat.pid(), SIGINT);
  ASSERT_NE(chat.wait_for("reply interrupted"), "");
  ASSERT_TRUE(chat.send("/reset\n"));
  ASSERT_NE(chat.wait_for("new conversation"), "");  // back at the prompt
  kill(chat.pid(), SIGINT);
  const int status = chat.wait_exit();
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 130);
  EXPECT_NE(chat.wait_for("kiln chat: 1 replies;"), "");
}

// After an interrupted reply, the next turn decodes only its new tokens: the whole conversation so
// far, the reply's tokens included, stays in the KV cache (counted by the verbose lines).
TEST(ChatCommand, InterruptedReplyStaysCached) {
  ChatProcess chat(long_reply_args({"-v"}));
  ASSERT_TRUE(chat.started());
  ASSERT_TRUE(chat.send(kUser1 + "\n"));
  ASSERT_TRUE(chat.reply_started());
  kill(chat.pid(), SIGINT);
  ASSERT_NE(chat.wait_for("reply interrupted"), "");
  const TurnCounts first = turn_counts(chat.wait_for("kiln chat: prompt "), 0);
  ASSERT_GT(first.n_reply, 0);
  ASSERT_TRUE(chat.send(kUser2 + "\n"));
  ASSERT_TRUE(chat.reply_started());  // the first reply's bytes are all there: its counts came after
  kill(chat.pid(), SIGINT);
  const TurnCounts second = turn_counts(chat.wait_for("kiln chat: prompt "), 0);
  EXPECT_EQ(second.n_cached, first.n_new + first.n_cached + first.n_reply);
  // What is new: the end of the reply's turn and the second message, a few dozen tokens.
  EXPECT_GT(second.n_new, 0);
  EXPECT_LT(second.n_new, 40);
  ASSERT_TRUE(chat.send("/exit\n"));
  const int status = chat.wait_exit();
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

// On a terminal the line can be edited (Left, then a typed letter) and Up recalls earlier lines.
TEST(ChatCommand, TerminalLinesCanBeEditedAndRecalled) {
  const std::string reply = direct_greedy(prompt_tokens({msg("user", "What is a kiln?")}), 8);
  const std::string out_path =
      std::string(KILN_BINARY_DIR) + "/chat_cli_test." + std::to_string(getpid()) + ".tty";
  int master = -1;
  const pid_t pid = forkpty(&master, nullptr, nullptr, nullptr);
  ASSERT_GE(pid, 0);
  if (pid == 0) {  // stdin and stderr are the terminal; replies go to a file
    if (!std::freopen(out_path.c_str(), "wb", stdout)) _exit(126);
    setenv("TERM", "xterm", 1);
    std::vector<std::string> args = greedy_args();
    std::vector<char*> argv{const_cast<char*>(kKiln.c_str()), const_cast<char*>("chat")};
    for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    execv(kKiln.c_str(), argv.data());
    _exit(127);
  }
  struct Reaper {
    pid_t pid;
    bool reaped = false;
    ~Reaper() {
      if (reaped) return;
      kill(pid, SIGKILL);
      waitpid(pid, nullptr, 0);
    }
  } reaper{pid};
  std::string screen, shown;  // all the terminal showed; what it showed since the last keys typed
  // libedit reads keys with the terminal in raw mode, set after the prompt is on the screen: a key
  // typed before that goes through the cooked line discipline first (a Ctrl-D there becomes a
  // character in the line, not the end of input). The pty shares its settings with this side.
  auto raw_mode = [&] {
    termios t{};
    return tcgetattr(master, &t) == 0 && (t.c_lflag & ICANON) == 0;
  };
  // Reads the terminal until `replies` replies are in the output file, the screen shows `notice`
  // since the last keys typed, and the prompt "> " waits for a line (the last thing on the
  // screen) with the terminal in raw mode; false after 30 s without that.
  auto at_prompt = [&](size_t replies, const std::string& notice = "") {
    std::string want;
    for (size_t i = 0; i < replies; ++i) want += reply + "\n";
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (std::chrono::steady_clock::now() < deadline) {
      if (shown.ends_with("> ") && shown.find(notice) != std::string::npos &&
          read_all(out_path) == want && raw_mode())
        return true;
      pollfd pfd{master, POLLIN, 0};
      if (poll(&pfd, 1, 100) < 0) return false;
      if (pfd.revents == 0) continue;
      char buf[4096];
      const ssize_t got = read(master, buf, sizeof buf);
      if (got <= 0) return false;
      screen.append(buf, static_cast<size_t>(got));
      shown.append(buf, static_cast<size_t>(got));
    }
    return false;
  };
  auto type = [&](const std::string& keys) {
    shown.clear();
    return write(master, keys.data(), keys.size()) == static_cast<ssize_t>(keys.size());
  };
  ASSERT_TRUE(at_prompt(0)) << screen;
  ASSERT_TRUE(type("What is a kil?\x1b[Dn\r"));  // Left before '?', then the missing 'n'
  ASSERT_TRUE(at_prompt(1)) << screen;
  ASSERT_TRUE(type("/reset\r"));
  ASSERT_TRUE(at_prompt(1, "new conversation")) << screen;
  ASSERT_TRUE(type("\x1b[A\x1b[A\r"));  // Up twice: the first message again
  ASSERT_TRUE(at_prompt(2)) << screen;
  // Ctrl-D on an empty line ends the chat. The terminal is read meanwhile, so that what the chat
  // writes on its way out never waits for this side.
  ASSERT_TRUE(type("\x04"));
  int status = 0;
  for (int i = 0; i < 300 && !reaper.reaped; ++i) {
    reaper.reaped = waitpid(pid, &status, WNOHANG) == pid;
    if (reaper.reaped) break;
    pollfd pfd{master, POLLIN, 0};
    if (poll(&pfd, 1, 100) > 0 && (pfd.revents & POLLIN) != 0) {
      char buf[4096];
      const ssize_t got = read(master, buf, sizeof buf);
      if (got > 0) screen.append(buf, static_cast<size_t>(got));
    } else {
      usleep(100000);  // nothing to read (or the terminal hung up): wait as long as the poll would
    }
  }
  ASSERT_TRUE(reaper.reaped) << "kiln chat did not end after Ctrl-D\n" << screen;
  close(master);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << screen;
  std::remove(out_path.c_str());
}

// The output of `kiln run` or `kiln chat` under a grammar flag, trailing newline dropped.
std::string constrained(const char* command, std::vector<std::string> flags) {
  std::vector<std::string> a{"-m", kModel, "--temp", "0", "-n", "64", "-t", "1", "-c", "512"};
  if (std::string(command) == "run") {
    a.insert(a.end(), {"-p", "Answer:", "--no-display-prompt"});
  } else {
    a.insert(a.end(), {"-p", "Give me JSON.", "--single-turn"});
  }
  a.insert(a.end(), flags.begin(), flags.end());
  const ChatRun r = run_kiln(command, a, "");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  std::string out = r.out;
  while (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

std::string temp_file(const std::string& name, const std::string& text) {
  const std::string path = std::string(KILN_BINARY_DIR) + "/" + name + "." + std::to_string(getpid());
  std::ofstream(path, std::ios::binary) << text;
  return path;
}

TEST(GrammarFlags, RunAndChatFollowTheGrammarOrSchema) {
  const std::string gbnf = "root ::= (\"yes\" | \"no\") \" \" [0-9]{2}";
  const std::string text = constrained("run", {"--grammar", gbnf});
  EXPECT_TRUE(text.size() == 6 || text.size() == 5) << text;
  EXPECT_TRUE(text.rfind("yes ", 0) == 0 || text.rfind("no ", 0) == 0) << text;
  EXPECT_TRUE(std::isdigit(static_cast<unsigned char>(text[text.size() - 1])) &&
              std::isdigit(static_cast<unsigned char>(text[text.size() - 2])))
      << text;
  const std::string gbnf_path = temp_file("grammar_flags.gbnf", gbnf);
  EXPECT_EQ(constrained("run", {"--grammar-file", gbnf_path}), text);

  const std::string schema =
      R"({"type": "object", "properties": {"n": {"type": "integer", "minimum": 3, "maximum": 9}, "tag": {"enum": ["a", "b"]}},
          "required": ["n", "tag"], "additionalProperties": false})";
  const std::string schema_path = temp_file("grammar_flags.json", schema);
  for (const char* command : {"run", "chat"}) {
    SCOPED_TRACE(command);
    const std::string out = constrained(command, {"-j", schema});
    const auto v = nlohmann::json::parse(out, nullptr, false);
    ASSERT_TRUE(v.is_object()) << out;
    EXPECT_EQ(v.size(), 2u) << out;
    EXPECT_TRUE(v["n"].is_number_integer() && v["n"] >= 3 && v["n"] <= 9) << out;
    EXPECT_TRUE(v["tag"] == "a" || v["tag"] == "b") << out;
    EXPECT_EQ(constrained(command, {"--json-schema-file", schema_path}), out);
  }
  std::remove(gbnf_path.c_str());
  std::remove(schema_path.c_str());
}

TEST(GrammarFlags, BadGrammarsAndSchemasAreErrors) {
  const std::vector<std::string> base{"-m", kModel, "-p", "x", "-n", "4", "-t", "1"};
  auto error_of = [&](std::vector<std::string> flags) {
    flags.insert(flags.begin(), base.begin(), base.end());
    const ChatRun r = run_kiln("run", flags, "");
    EXPECT_NE(r.exit_code, 0) << r.out;
    return r.err;
  };
  EXPECT_NE(error_of({"--grammar", "root ::= \"a\"", "-j", "{}"}).find("give only one"), std::string::npos);
  EXPECT_NE(error_of({"-j", R"({"type": "string", "contentEncoding": "base64"})"}).find("contentEncoding"),
            std::string::npos);
  EXPECT_NE(error_of({"-j", "{not json"}).find("--json-schema: not valid JSON"), std::string::npos);
  EXPECT_NE(error_of({"--grammar", "root ::= ("}).find("kiln run: "), std::string::npos);
  EXPECT_NE(error_of({"--grammar-file", "/nonexistent/g.gbnf"}).find("kiln run: "), std::string::npos);
}

}  // namespace
}  // namespace kiln
