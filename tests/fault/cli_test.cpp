// The `kiln` command line as a user runs it: outputs checked against llama.cpp's references, and
// bad input answered with a message and an exit code, never a crash.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "test_data.h"

namespace {

const std::string kKiln = std::string(KILN_BINARY_DIR) + "/kiln";
const std::string kModel = kiln::test_data::path("models/llama-spm-e128-f32.gguf");

struct CliResult {
  int exit_code;
  std::string out;  // stdout and stderr together
};

CliResult run(const std::string& args) {
  const std::string cmd = kKiln + " " + args + " 2>&1";
  FILE* pipe = popen(cmd.c_str(), "r");
  EXPECT_NE(pipe, nullptr);
  std::string out;
  std::array<char, 4096> buf{};
  size_t n = 0;
  while ((n = fread(buf.data(), 1, buf.size(), pipe)) > 0) out.append(buf.data(), n);
  const int status = pclose(pipe);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status), out};
}

std::string quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

nlohmann::json reference() {
  std::ifstream in(kiln::test_data::path("reference/llama-spm-e128-f32.json"));
  return nlohmann::json::parse(in);
}

TEST(Cli, RunReproducesLlamaCppGreedyText) {
  const auto ref = reference();
  const auto& c = ref["cases"][0];
  const CliResult r = run("run -m " + kModel + " -p " + quote(c["text"].get<std::string>()) + " -n " +
                    std::to_string(c["greedy"].size()) + " --temp 0 -ctk f32 -ctv f32 -fa off -t 2 --no-display-prompt");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find(c["greedy_text"].get<std::string>()), std::string::npos)
      << "llama.cpp: '" << c["greedy_text"].get<std::string>() << "'\nkiln: " << r.out;
}

TEST(Cli, TokenizePrintsLlamaCppIds) {
  const auto ref = reference();
  const auto& c = ref["cases"][0];
  const CliResult r = run("tokenize -m " + kModel + " -p " + quote(c["text"].get<std::string>()) + " --ids");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  std::string want = "[";
  for (size_t i = 0; i < c["tokens"].size(); ++i) want += (i ? ", " : "") + std::to_string(c["tokens"][i].get<int>());
  EXPECT_NE(r.out.find(want + "]"), std::string::npos) << r.out;
}

TEST(Cli, PerplexityAndKlDivergenceAgainstItself) {
  const std::string text = std::string(KILN_SOURCE_DIR) + "/tests/convert/data/heldout_jude_rev1-3.txt";
  const std::string base = std::string(KILN_BINARY_DIR) + "/cli_test_base.kld";
  const CliResult save = run("perplexity -m " + kModel + " -f " + text + " -c 64 --chunks 3 -t 2 --kl-divergence-base " + base);
  ASSERT_EQ(save.exit_code, 0) << save.out;
  EXPECT_NE(save.out.find("Final estimate: PPL = "), std::string::npos) << save.out;
  const CliResult cmp = run("perplexity -m " + kModel + " -f " + text + " -c 64 --chunks 3 -t 2 --kl-divergence-base " + base +
                      " --kl-divergence");
  ASSERT_EQ(cmp.exit_code, 0) << cmp.out;
  EXPECT_NE(cmp.out.find("Same top p: 100.000 %"), std::string::npos) << cmp.out;
  const CliResult other = run("perplexity -m " + kiln::test_data::path("models/qwen3-e64-Q8_0.gguf") + " -f " + text +
                        " -c 64 --chunks 3 --kl-divergence-base " + base + " --kl-divergence");
  EXPECT_EQ(other.exit_code, 1) << other.out;
  EXPECT_NE(other.out.find("another vocabulary"), std::string::npos) << other.out;
  std::remove(base.c_str());
}

TEST(Cli, BadInputGetsAClearErrorAndExitCode) {
  struct Case {
    std::string args;
    int exit_code;
    std::string message;
  };
  const std::string long_prompt(3000, 'a');
  const Case cases[] = {
      {"frobnicate", 2, "unknown command 'frobnicate'"},
      {"run -m /nonexistent.gguf -p hi", 1, "/nonexistent.gguf"},
      {"run -m " + kModel + " -p hi --no-such-flag", 2, "unknown option '--no-such-flag'"},
      {"run -m " + kModel + " -p hi -n", 2, "-n needs a value"},
      {"run -m " + kModel + " -p hi -n ten", 2, "'ten' is not an integer"},
      {"run -m " + kModel + " -p hi -ctk q4_0", 2, "cache type 'q4_0' is not supported"},
      {"run -m " + kModel + " -p hi -fa maybe", 2, "'maybe' is not on, off or auto"},
      {"run -m " + kModel + " -p hi --logit-bias 99999999+1", 1, "logit_bias token id 99999999"},
      {"run -m " + kModel + " -c 64 -p " + long_prompt, 1, "more than the context of 64"},
      {"run -m " + kiln::test_data::path("vocab/ggml-vocab-llama-spm.gguf") + " -p hi", 1, "model:"},
      {"perplexity -m " + kModel + " -f /nonexistent.txt", 1, "cannot read '/nonexistent.txt'"},
  };
  for (const auto& c : cases) {
    const CliResult r = run(c.args);
    EXPECT_EQ(r.exit_code, c.exit_code) << c.args.substr(0, 120) << "\n" << r.out;
    EXPECT_NE(r.out.find(c.message), std::string::npos) << c.args.substr(0, 120) << "\n" << r.out;
  }
}

TEST(Cli, DefaultModelIsEmbedded) {
  const CliResult r = run("run -p 'And God said' -n 4 --temp 0 -s 1 -t 2");  // a given seed is not printed
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_EQ(r.out.rfind("And God said", 0), 0u) << r.out;
}

}  // namespace
