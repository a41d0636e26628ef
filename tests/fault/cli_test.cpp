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
      {"run -m " + kModel + " -p hi --device cuda0", 2, "--device: no device 'cuda0'"},
      {"run -m " + kModel + " -p hi --device sim0,sim1", 2, "kiln runs a model on one device"},
      {"run -m " + kModel + " -p hi --sim-capacity sim0=lots", 2, "'lots' is not a number of GiB"},
      {"run -m " + kModel + " -p hi --sim-capacity gpu=1", 2, "'gpu' is not a sim device name"},
      {"run -m " + kModel + " -p hi --device sim0 --sim-capacity sim0=0.01", 1,
       "weights of 'random-llama-2x128' do not fit: sim0: out of memory: cannot allocate"},
      {"serve -m " + kModel + " --port 0 --device sim0 --sim-capacity sim0=0.01", 1,
       "do not fit: sim0: out of memory"},
  };
  for (const auto& c : cases) {
    const CliResult r = run(c.args);
    EXPECT_EQ(r.exit_code, c.exit_code) << c.args.substr(0, 120) << "\n" << r.out;
    EXPECT_NE(r.out.find(c.message), std::string::npos) << c.args.substr(0, 120) << "\n" << r.out;
  }
}

// stdout and stderr of `kiln run` apart: the text, and the lines kiln writes about it.
struct RunOutput {
  std::string text;
  std::string speculative;  // the "kiln run: speculative: ..." line, or ""
};

RunOutput run_text(const std::string& args) {
  const CliResult r = run("run --no-display-prompt -t 2 " + args);
  EXPECT_EQ(r.exit_code, 0) << args << "\n" << r.out;
  RunOutput o;
  const size_t timing = r.out.find("\nkiln run: prompt ");
  EXPECT_NE(timing, std::string::npos) << r.out;
  o.text = r.out.substr(0, timing);
  EXPECT_NE(r.out.find("generated ", timing), std::string::npos) << r.out;
  const size_t spec = r.out.find("kiln run: speculative: drafted ");
  if (spec != std::string::npos) o.speculative = r.out.substr(spec, r.out.find('\n', spec) - spec);
  return o;
}

long long count_after(const std::string& line, const std::string& word) {
  const size_t at = line.find(word);
  return at == std::string::npos ? -1 : std::stoll(line.substr(at + word.size()));
}

TEST(Cli, RunWithADraftModelPrintsTheSameTextAndItsCounts) {
  const std::string base = "-m " + kModel + " -p 'The quick brown fox' -n 24 ";
  for (const std::string sampling : {"--temp 0 -s 1", "--temp 0.8 -s 7"}) {
    const RunOutput plain = run_text(base + sampling);
    const RunOutput spec = run_text(base + sampling + " -md " + kModel + " --spec-draft-n-max 5");
    EXPECT_EQ(spec.text, plain.text) << sampling;
    EXPECT_TRUE(plain.speculative.empty()) << plain.speculative;
    EXPECT_GT(count_after(spec.speculative, "drafted "), 0) << spec.speculative;
    EXPECT_GE(count_after(spec.speculative, "accepted "), 0) << spec.speculative;
  }
}

TEST(Cli, RunWithNgramDraftsOnTheLoopingDefaultModel) {
  const std::string base = "-p 'And God said unto Moses,' -n 64 --temp 0 -s 1 ";
  const RunOutput plain = run_text(base);
  const RunOutput spec = run_text(base + "--spec-type ngram-simple --spec-ngram-simple-size-n 2");
  EXPECT_EQ(spec.text, plain.text);
  EXPECT_GT(count_after(spec.speculative, "accepted "), 0) << spec.speculative;
}

TEST(Cli, BadSpeculativeFlagsGetAClearError) {
  const std::string run_hi = "run -m " + kModel + " -p hi -n 2 ";
  const std::string qwen = kiln::test_data::path("models/qwen2-e64-Q8_0.gguf");
  const struct {
    std::string args;
    int exit_code;
    std::string message;
  } cases[] = {
      {run_hi + "--spec-type eagle", 2, "unknown speculative type 'eagle'"},
      {run_hi + "--spec-type draft-simple", 1, "draft-simple needs a draft model"},
      {run_hi + "-md /nonexistent.gguf", 1, "kiln run: draft model:"},
      {run_hi + "-md " + qwen, 1, "vocabulary types differ"},
      {run_hi + "--spec-type ngram-simple -md " + kModel, 1, "do not include draft-simple"},
      {run_hi + "--spec-type none -md " + kModel, 1, "do not include draft-simple"},
      {run_hi + "-md " + kModel + " --spec-draft-p-min 2", 1, "--spec-draft-p-min 2 is outside [0, 1]"},
      {run_hi + "-md " + kModel + " --spec-draft-n-min 9", 1, "--spec-draft-n-min 9 is outside [0, 3]"},
      {run_hi + "--spec-type ngram-simple --spec-ngram-simple-size-n 0", 1, "--spec-ngram-simple-size-n 0"},
      {run_hi + "--spec-type ngram-mod --spec-ngram-mod-n-max 2000", 1, "--spec-ngram-mod-n-max 2000"},
      {"bench -m " + kModel + " -p 0 -n 4 -r 1 --spec-type draft-simple", 1,
       "draft-simple needs a draft model"},
  };
  for (const auto& c : cases) {
    const CliResult r = run(c.args);
    EXPECT_EQ(r.exit_code, c.exit_code) << c.args << "\n" << r.out;
    EXPECT_NE(r.out.find(c.message), std::string::npos) << c.args << "\n" << r.out;
  }
}

TEST(Cli, BenchMeasuresSpeculationAgainstPlainGeneration) {
  const CliResult r = run("bench -m " + kModel + " -p 0 -n 16 -r 1 -t 2 -md " + kModel);
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("| gen16 spec |"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("vs gen16"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("output identical to gen16: yes"), std::string::npos) << r.out;
}

TEST(Cli, DefaultModelIsEmbedded) {
  const CliResult r = run("run -p 'And God said' -n 4 --temp 0 -s 1 -t 2");  // a given seed is not printed
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_EQ(r.out.rfind("And God said", 0), 0u) << r.out;
}

// --device sim0 runs the model in the sim device's memory: the same greedy text as llama.cpp, the
// same log-probabilities as the CPU (KL divergence against a CPU base), and every command runs.
TEST(Cli, ModelsRunOnASimDevice) {
  const auto ref = reference();
  const auto& c = ref["cases"][0];
  const CliResult r = run("run -m " + kModel + " -p " + quote(c["text"].get<std::string>()) + " -n " +
                          std::to_string(c["greedy"].size()) +
                          " --temp 0 -ctk f32 -ctv f32 -fa off -t 2 --no-display-prompt --device sim0");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find(c["greedy_text"].get<std::string>()), std::string::npos) << r.out;

  const std::string text = std::string(KILN_SOURCE_DIR) + "/tests/convert/data/heldout_jude_rev1-3.txt";
  const std::string base = std::string(KILN_BINARY_DIR) + "/cli_test_sim_base.kld";
  const std::string ppl =
      "perplexity -m " + kModel + " -f " + text + " -c 64 --chunks 2 -t 2 --kl-divergence-base " + base;
  const CliResult on_cpu = run(ppl);
  ASSERT_EQ(on_cpu.exit_code, 0) << on_cpu.out;
  const CliResult on_sim = run(ppl + " --kl-divergence --device sim0 --sim-capacity sim0=0.1");
  ASSERT_EQ(on_sim.exit_code, 0) << on_sim.out;
  EXPECT_NE(on_sim.out.find("Same top p: 100.000 %"), std::string::npos) << on_sim.out;
  const auto estimate = [](const std::string& out) { return out.substr(out.find("Final estimate")); };
  EXPECT_EQ(estimate(on_cpu.out).substr(0, 40), estimate(on_sim.out).substr(0, 40));
  std::remove(base.c_str());

  const CliResult bench = run("bench -m " + kModel + " -p 8 -n 4 -r 1 -t 2 --device sim0");
  ASSERT_EQ(bench.exit_code, 0) << bench.out;
  EXPECT_NE(bench.out.find("device sim0"), std::string::npos) << bench.out;
  const CliResult chat = run("chat -m " + kModel + " -p hello -st -n 4 -t 2 --device sim1");
  EXPECT_EQ(chat.exit_code, 0) << chat.out;
}

TEST(Cli, ListDevicesNamesKindCapacityAndFreeMemory) {
  const CliResult r = run("run --list-devices --sim-capacity sim0=0.5,sim2=1.25");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_EQ(r.out.rfind("Available devices:\n  cpu: cpu, host RAM (", 0), 0u) << r.out;
  EXPECT_NE(r.out.find("  sim0: sim, simulated accelerator, not host-visible (512 MiB, 512 MiB free)\n"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("  sim2: sim, simulated accelerator, not host-visible (1280 MiB, 1280 MiB free)\n"),
            std::string::npos)
      << r.out;
  const CliResult named = run("serve --list-devices --device sim1");
  ASSERT_EQ(named.exit_code, 0) << named.out;
  EXPECT_NE(named.out.find("  sim1: sim, simulated accelerator, not host-visible (4096 MiB, 4096 MiB free)"),
            std::string::npos)
      << named.out;
}

}  // namespace
