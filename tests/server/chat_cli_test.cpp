// `kiln chat` as a child process on the qwen2 fixture (which has a chat template), messages piped
// into stdin: every reply must equal the greedy continuation a Context gives directly for the
// template rendering of the conversation so far, as the server's tests check the routes.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <fstream>
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

// The conversation's prompt tokens as the model's template (or `source`) renders it, with the
// vocabulary's BOS/EOS texts and the generation prompt.
std::vector<int32_t> prompt_tokens(const std::vector<ChatMessage>& messages, const std::string& source = "") {
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
  return serve::tokenize_chat(tok, *text);
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

// Runs `kiln chat ARGS` with `input` on stdin (a file, not a terminal).
ChatRun run_chat(const std::vector<std::string>& args, const std::string& input) {
  const std::string base = std::string(KILN_BINARY_DIR) + "/chat_cli_test." + std::to_string(getpid());
  const std::string in_path = base + ".in", out_path = base + ".out", err_path = base + ".err";
  std::ofstream(in_path, std::ios::binary) << input;
  ChatRun r;
  const pid_t pid = fork();
  if (pid == 0) {
    if (!std::freopen(in_path.c_str(), "rb", stdin) || !std::freopen(out_path.c_str(), "wb", stdout) ||
        !std::freopen(err_path.c_str(), "wb", stderr))
      _exit(126);
    std::vector<char*> argv{const_cast<char*>(kKiln.c_str()), const_cast<char*>("chat")};
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

// Greedy, 8 tokens per reply, one thread, the context the reference uses.
std::vector<std::string> greedy_args(std::vector<std::string> more = {}) {
  std::vector<std::string> a{"-m", kModel, "--temp", "0", "-n", "8", "-t", "1", "-c", "1024", "-s", "1"};
  a.insert(a.end(), more.begin(), more.end());
  return a;
}

const std::string kUser1 = "Hello! What is a kiln?";
const std::string kUser2 = "And how hot does it get?";

TEST(ChatCommand, TwoTurnsFollowTheTemplateAndResetStartsOver) {
  const std::string reply1 = direct_greedy(prompt_tokens({msg("user", kUser1)}), 8);
  const std::string reply2 =
      direct_greedy(prompt_tokens({msg("user", kUser1), msg("assistant", reply1), msg("user", kUser2)}), 8);
  ASSERT_FALSE(reply1.empty());
  ASSERT_FALSE(reply2.empty());
  const ChatRun r = run_chat(greedy_args({"--verbose"}),
                             kUser1 + "\n" + kUser2 + "\n/reset\n" + kUser1 + "\n/exit\n" + "never read\n");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, reply1 + "\n" + reply2 + "\n" + reply1 + "\n") << r.err;
  EXPECT_NE(r.err.find("new conversation"), std::string::npos) << r.err;
  // The second turn decodes only what follows the first turn's cached tokens.
  const size_t second = r.err.find("kiln chat: prompt", r.err.find("kiln chat: prompt") + 1);
  ASSERT_NE(second, std::string::npos) << r.err;
  const size_t cached_at = r.err.find(" cached)", second);
  ASSERT_NE(cached_at, std::string::npos) << r.err;
  const size_t open = r.err.rfind('(', cached_at);
  EXPECT_GE(std::stoi(r.err.substr(open + 1)), static_cast<int>(prompt_tokens({msg("user", kUser1)}).size()))
      << r.err;
  EXPECT_NE(r.err.find("kiln chat: 3 replies;"), std::string::npos) << r.err;
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

// Ctrl-C during a reply stops it and the chat goes on; Ctrl-C at the prompt ends the chat (130).
TEST(ChatCommand, CtrlCStopsAReplyThenEndsTheChat) {
  int in[2], out[2], err[2];
  ASSERT_EQ(pipe(in), 0);
  ASSERT_EQ(pipe(out), 0);
  ASSERT_EQ(pipe(err), 0);
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    dup2(in[0], 0);
    dup2(out[1], 1);
    dup2(err[1], 2);
    for (int fd : {in[0], in[1], out[0], out[1], err[0], err[1]}) close(fd);
    execl(kKiln.c_str(), kKiln.c_str(), "chat", "-m", kModel.c_str(), "--temp", "0", "-n", "400",
          "--ignore-eos", "-t", "1", "-c", "1024", "-s", "1", static_cast<char*>(nullptr));
    _exit(127);
  }
  close(in[0]);
  close(out[1]);
  close(err[1]);
  struct Reaper {
    pid_t pid;
    bool reaped = false;
    ~Reaper() {
      if (reaped) return;
      kill(pid, SIGKILL);
      waitpid(pid, nullptr, 0);
    }
  } reaper{pid};
  FILE* log = fdopen(err[0], "r");
  ASSERT_NE(log, nullptr);
  auto wait_for = [&](const char* text) {
    char line[1024];
    while (std::fgets(line, sizeof line, log)) {
      if (std::strstr(line, text)) return true;
    }
    return false;
  };
  const std::string message = kUser1 + "\n";
  ASSERT_EQ(write(in[1], message.data(), message.size()), static_cast<ssize_t>(message.size()));
  char first = 0;
  ASSERT_EQ(read(out[0], &first, 1), 1);  // the reply is streaming
  kill(pid, SIGINT);
  ASSERT_TRUE(wait_for("reply interrupted"));
  ASSERT_EQ(write(in[1], "/reset\n", 7), 7);
  ASSERT_TRUE(wait_for("new conversation"));  // back at the prompt
  kill(pid, SIGINT);
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  reaper.reaped = true;
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 130);
  EXPECT_TRUE(wait_for("kiln chat: 1 replies;"));
  std::fclose(log);
  close(in[1]);
  close(out[0]);
}

}  // namespace
}  // namespace kiln
