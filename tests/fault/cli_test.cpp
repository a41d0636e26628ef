// The `kiln` command line as a user runs it: outputs checked against llama.cpp's references, and
// bad input answered with a message and an exit code, never a crash.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "shell_command.h"
#include "temp_dir.h"
#include "test_data.h"

namespace {

const std::string kKiln = std::string(KILN_BINARY_DIR) + "/kiln";
const std::string kModel = kiln::test_data::path("models/llama-spm-e128-f32.gguf");

using kiln::test::CliResult;

// Runs `kiln ARGS`; `redirect` says where stderr goes (with stdout by default).
// Every command is bounded in time (coreutils' timeout: exit 124): one that serves instead of
// failing must not hang the suite.
CliResult run(const std::string& args, const std::string& redirect = "2>&1") {
  return kiln::test::run_shell("timeout 300 " + kKiln + " " + args + " " + redirect);
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

// KILN_CPU=avx2 on an AVX-512 machine gives the AVX-512 path's logits bit for bit (the AVX-512
// kernels keep the AVX2 ones' float order), on every fixture model (with the extra fixtures) and
// the embedded one: prompt positions (the prompt kernels) and, with -b 1, one token at a time (the
// one-token kernels). `kiln --version` names the level and the lowering.
TEST(Cli, KernelLevelsGiveTheSameLogits) {
  const CliResult version = run("--version");
  ASSERT_EQ(version.exit_code, 0) << version.out;
  if (version.out.find("cpu kernels: avx512") == std::string::npos)
    GTEST_SKIP() << "this CPU has one SIMD level (" << version.out << "): nothing to compare";
  const CliResult lowered = kiln::test::run_shell("KILN_CPU=avx2 " + kKiln + " --version 2>&1");
  EXPECT_NE(lowered.out.find("cpu kernels: avx2 (AVX2 FMA F16C); KILN_CPU lowered it from avx512"), std::string::npos)
      << lowered.out;
  const CliResult unknown = kiln::test::run_shell("KILN_CPU=avx9 " + kKiln + " --version 2>&1");
  EXPECT_NE(unknown.out.find("cpu kernels: avx512 (AVX2 FMA F16C AVX512F"), std::string::npos) << unknown.out;
  EXPECT_NE(unknown.out.find("KILN_CPU='avx9' ignored"), std::string::npos) << unknown.out;

  kiln::test::TempDir dir("kernel_levels");
  const std::string text = std::string(KILN_SOURCE_DIR) + "/tests/convert/data/heldout_jude_rev1-3.txt";
  std::vector<std::string> models = {""};  // the embedded model
  for (const auto& m : kiln::test_data::files("models", ".gguf", true)) models.push_back("-m " + m.string());
  ASSERT_GT(models.size(), 7u);
  auto logits = [&](const std::string& env, const std::string& model, const std::string& batch) {
    const std::string out = dir.path() + "/logits.bin";
    const CliResult r = kiln::test::run_shell(env + " " + kKiln + " perplexity " + model + " -f " + text +
                                              " -c 64 --chunks 2 -t 2 " + batch + " --logits-out " + out + " 2>&1");
    EXPECT_EQ(r.exit_code, 0) << r.out;
    std::ifstream in(out, std::ios::binary);
    return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  };
  for (const std::string& model : models) {
    for (const std::string batch : {"", "-b 1 -ub 1"}) {
      const std::string avx512 = logits("", model, batch);
      ASSERT_GT(avx512.size(), 64u * 4) << model;
      EXPECT_TRUE(avx512 == logits("KILN_CPU=avx2", model, batch)) << "model '" << model << "' " << batch;
    }
  }
}

// -f drops one final newline, as llama.cpp's -f does for llama-perplexity: "text\n" scores the
// tokens of "text", and only a second newline adds one.
TEST(Cli, PerplexityFileLosesOneFinalNewline) {
  const std::string path = std::string(KILN_BINARY_DIR) + "/cli_test_ppl." + std::to_string(getpid()) + ".txt";
  const std::string text(std::string(200, 'a') + " the end");
  auto n_tokens = [&](const std::string& content) {
    std::ofstream(path, std::ios::binary) << content;
    const CliResult r = run("perplexity -m " + kModel + " -f " + path + " -c 16 --chunks 1 -t 1");
    EXPECT_EQ(r.exit_code, 0) << r.out;
    return std::atoi(r.out.c_str() + r.out.find("kiln perplexity: ") + 17);
  };
  const int plain = n_tokens(text);
  EXPECT_GT(plain, 16);
  EXPECT_EQ(n_tokens(text + "\n"), plain);
  EXPECT_GT(n_tokens(text + "\n\n"), plain);
  std::remove(path.c_str());
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
      {"run -m " + kModel + " -p hi --logit-bias 99999999+1", 1,
       "kiln run: --logit-bias: token id 99999999 is outside the vocabulary (0..31999)"},
      {"run -m " + kModel + " -c 64 -p " + long_prompt, 1, "more than the context of 64"},
      {"run -m " + kiln::test_data::path("vocab/ggml-vocab-llama-spm.gguf") + " -p hi", 1, "model:"},
      {"perplexity -m " + kModel + " -f /nonexistent.txt", 1, "cannot read '/nonexistent.txt'"},
      {"run -m " + kModel + " -p hi --device cuda0", 2, "--device: no device 'cuda0'"},
      {"run -m " + kModel + " -p hi --device sim0,sim0", 2, "--device: device 'sim0' named twice in 'sim0,sim0'"},
      {"run -m " + kModel + " -p hi --device sim0 -sm row", 2, "split mode 'row' (each matrix split across devices)"},
      {"run -m " + kModel + " -p hi --device sim0 -ot nope", 2, "-ot: 'nope' is not PATTERN=DEVICE"},
      {"run -m " + kModel + " -p hi --device sim0 -ts 1,-1", 2, "-ts: '-1' is not a share (>= 0)"},
      {"run -m " + kModel + " -p hi --device sim0 -ngl many", 2, "'many' is not a layer count"},
      {"run -m " + kModel + " -p hi --sim-capacity sim0=lots", 2, "'lots' is not a number of GiB"},
      {"run -m " + kModel + " -p hi --sim-capacity gpu=1", 2, "'gpu' is not a sim device name"},
      // With --fit off a model that does not fit is refused; with fit (the default) it is split.
      {"run -m " + kModel + " -p hi --device sim0 --sim-capacity sim0=0.01 --fit off", 1,
       "weights of 'random-llama-2x128' do not fit: sim0: out of memory for 'random-llama-2x128' (weights)"},
      {"serve -m " + kModel + " --port 0 --device sim0 --sim-capacity sim0=0.01 --fit off", 1,
       "do not fit: sim0: out of memory"},
      {"run -m " + kModel + " -p hi -n 1 --device sim0 --sim-capacity sim0=0.01", 0,
       "do not fit sim0 (10.24 MiB of room): -ngl "},
      {"run -m " + kModel + " -p hi --device sim0 --max-mem sim0=0.0001,cpu=0.0001 -fitc 64", 1,
       "fit: the model does not fit: the closest placement needs"},
  };
  for (const auto& c : cases) {
    const CliResult r = run(c.args);
    EXPECT_EQ(r.exit_code, c.exit_code) << c.args.substr(0, 120) << "\n" << r.out;
    EXPECT_NE(r.out.find(c.message), std::string::npos) << c.args.substr(0, 120) << "\n" << r.out;
  }
}

// A context that no machine's memory holds (2^31 cells of the fixture: 1 TiB of KV cache, 4 TiB of
// inputs) is refused before anything is allocated, by run, chat and serve alike, in one line with
// the sizes in GiB; with --max-mem the budget is the limit; a normal size still runs.
TEST(Cli, AContextLargerThanTheMemoryIsRefusedBeforeAllocating) {
  const std::string huge = " -m " + kModel + " -t 2 -c 2147483647";
  const std::string refusal =
      ": cpu: out of memory for 'random-llama-2x128' (a context of 2147483647 tokens: KV cache 1024.00 GiB, inputs "
      "4096.00 GiB): 5120.00 GiB needed, ";
  for (const std::string command : {"run", "chat", "serve"}) {
    const std::string extra = command == "run" ? " -p hi -n 1" : command == "serve" ? " --port 0" : "";
    // timeout: a server that came up after all would otherwise keep the test waiting.
    const CliResult r = kiln::test::run_shell("timeout 60 " + kKiln + " " + command + huge + extra + " </dev/null 2>&1");
    EXPECT_EQ(r.exit_code, 1) << command << "\n" << r.out;
    const size_t at = r.out.find("kiln " + command + refusal);
    ASSERT_NE(at, std::string::npos) << command << "\n" << r.out;
    const std::string line = r.out.substr(at, r.out.find('\n', at) - at);
    EXPECT_NE(line.find(" GiB available (no budget; "), std::string::npos) << line;
  }
  const CliResult budget = run("run" + huge + " -p hi -n 1 --max-mem cpu=2");
  EXPECT_EQ(budget.exit_code, 1) << budget.out;
  EXPECT_NE(budget.out.find("kiln run: cpu: 'random-llama-2x128' (a context of 2147483647 tokens: KV cache 1024.00 "
                            "GiB, inputs 4096.00 GiB) needs 5120.00 GiB, more than the budget of 2.00 GiB (--max-mem "
                            "cpu=GiB sets it)"),
            std::string::npos)
      << budget.out;
  const CliResult normal = run("run -m " + kModel + " -t 2 -c 4096 -p hi -n 1");
  EXPECT_EQ(normal.exit_code, 0) << normal.out;
}

// --swap-dir names a folder that can hold files, for every command that runs a model; refused at
// start otherwise, in one line. With one, run works and leaves nothing there.
TEST(Cli, ASwapDirThatCannotHoldFilesIsRefusedAtStart) {
  const std::string missing = testing::TempDir() + "kiln-no-such-swap-dir";
  for (const std::string command : {"run", "chat", "serve"}) {
    const std::string extra = command == "run" ? " -p hi -n 1" : command == "serve" ? " --port 0" : "";
    const CliResult r = kiln::test::run_shell("timeout 60 " + kKiln + " " + command + " -m " + kModel +
                                              " -t 2 --swap-dir " + missing + extra + " </dev/null 2>&1");
    EXPECT_EQ(r.exit_code, 1) << command << "\n" << r.out;
    EXPECT_NE(r.out.find("kiln " + command + ": --swap-dir " + missing + ": No such file or directory\n"),
              std::string::npos)
        << command << "\n" << r.out;
  }
  // An empty name was read as "no --swap-dir" (issue 30); it is a usage error, as for the other
  // folder flags.
  for (const std::string flag : {"--swap-dir", "--sim-shared"}) {
    const CliResult empty = run("run -m " + kModel + " -t 2 -p hi -n 1 " + flag + " ''");
    EXPECT_EQ(empty.exit_code, 2) << flag << "\n" << empty.out;
    EXPECT_NE(empty.out.find("kiln run: " + flag + ": needs a name, not an empty value"), std::string::npos)
        << flag << "\n" << empty.out;
  }
  const std::string dir = testing::TempDir() + "kiln-swap-dir";
  std::filesystem::create_directories(dir);
  const CliResult ok = run("run -m " + kModel + " -t 2 -p hi -n 2 --swap-dir " + dir);
  EXPECT_EQ(ok.exit_code, 0) << ok.out;
  EXPECT_TRUE(std::filesystem::is_empty(dir));
  std::filesystem::remove_all(dir);
}

// --no-mmap and --mlock change where the weights live, never the text; a lock that the limit
// refuses (RLIMIT_MEMLOCK 0, and no CAP_IPC_LOCK) is one warning that names the limit, and the run
// goes on.
TEST(Cli, NoMmapAndMlockGiveTheSameTextAndAFailedLockWarnsOnce) {
  const std::string args = "run -m " + kModel + " -t 2 -p 'In the beginning' -n 6 --temp 0";
  const CliResult plain = run(args, "2>/dev/null");
  ASSERT_EQ(plain.exit_code, 0);
  for (const std::string flags : {" --no-mmap", " --mlock", " --no-mmap --mlock"}) {
    const CliResult r = run(args + flags, "2>/dev/null");
    EXPECT_EQ(r.exit_code, 0) << flags;
    EXPECT_EQ(r.out, plain.out) << flags;
  }
  // Root keeps CAP_IPC_LOCK, which ignores the limit: drop it from the bounding set first.
  const std::string no_cap = geteuid() == 0 ? "setpriv --bounding-set=-ipc_lock --inh-caps=-ipc_lock " : "";
  const CliResult limited = kiln::test::run_shell(no_cap + "prlimit --memlock=0:0 " + kKiln + " " + args +
                                                  " --mlock 2>&1 >/dev/null");
  EXPECT_EQ(limited.exit_code, 0) << limited.out;
  const std::string warning = "kiln run: warning: --mlock: cannot lock ";
  const size_t at = limited.out.find(warning);
  ASSERT_NE(at, std::string::npos) << limited.out;
  EXPECT_EQ(limited.out.find(warning, at + 1), std::string::npos) << "warned twice:\n" << limited.out;
  EXPECT_NE(limited.out.find("RLIMIT_MEMLOCK is 0 bytes: raise it with 'ulimit -l'"), std::string::npos)
      << limited.out;
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

// The draft model is placed by its own flags as llama.cpp places it: -devd's devices (default the
// model's --device), -ngld's layers (default auto: --fit), -otd's overrides (the model's -ot is not
// inherited). The text is the same wherever it lies.
TEST(Cli, ADraftModelIsPlacedByItsOwnFlags) {
  const std::string base = "run --no-display-prompt -t 2 -v -m " + kModel +
                           " -p 'The quick brown fox' -n 16 --temp 0 --device sim0 --sim-capacity sim1=1 "
                           "-ot 'ffn_.*=cpu'";
  // The generated text: what comes before the timing line, after kiln's own lines.
  auto generated = [](const std::string& out) {
    std::string text = out.substr(0, out.find("\nkiln run: prompt "));
    while (text.starts_with("kiln run: ")) text.erase(0, text.find('\n') + 1);
    return text;
  };
  const CliResult plain = run(base);
  ASSERT_EQ(plain.exit_code, 0) << plain.out;
  ASSERT_FALSE(generated(plain.out).empty()) << plain.out;
  struct Case {
    std::string flags;
    std::vector<std::string> draft_on;  // the devices holding the draft's weights, in breakdown order
    std::string layers;                 // the draft's split line ("" when it lies whole on one device)
  };
  const Case cases[] = {
      {"", {"sim0"}, ""},
      {" -devd none", {"cpu"}, ""},
      {" -devd sim1", {"sim1"}, ""},
      {" -devd sim1 -ngld 1", {"cpu", "sim1"}, "kiln run: draft model: the output layer on sim1; layers 0-1 on cpu\n"},
      {" -ngld 0", {"cpu"}, "kiln run: draft model: layers 0-1 and the output layer on cpu\n"},
      {" -otd 'ffn_.*=cpu'", {"cpu", "sim0"}, "(and the tensors -ot names where it says)\n"},
  };
  for (const Case& c : cases) {
    const CliResult r = run(base + " -md " + kModel + c.flags);
    ASSERT_EQ(r.exit_code, 0) << c.flags << "\n" << r.out;
    // Both models are owners named after the model: the target's two (its -ot split: cpu and sim0)
    // taken out, the rest are the draft's.
    std::vector<std::string> draft = kiln::test::devices_holding(r.out, "random-llama-2x128");
    for (const char* target : {"cpu", "sim0"}) {
      const auto it = std::find(draft.begin(), draft.end(), target);
      ASSERT_NE(it, draft.end()) << c.flags << "\n" << r.out;
      draft.erase(it);
    }
    std::sort(draft.begin(), draft.end());
    EXPECT_EQ(draft, c.draft_on) << c.flags << "\n" << r.out;
    if (c.layers.empty()) {
      EXPECT_EQ(r.out.find("kiln run: draft model: "), std::string::npos) << c.flags << "\n" << r.out;
    } else {
      EXPECT_NE(r.out.find(c.layers), std::string::npos) << c.flags << "\n" << r.out;
    }
    EXPECT_EQ(generated(r.out), generated(plain.out)) << c.flags << "\n" << r.out;
  }
  const CliResult bad = run(base + " -md " + kModel + " -devd sim1,sim1");
  EXPECT_EQ(bad.exit_code, 2) << bad.out;
  EXPECT_NE(bad.out.find("device 'sim1' named twice"), std::string::npos) << bad.out;
}

// -fitp prints each device's estimate against its room and exits without generating; with
// --segmented on a budget just under the model's total, the device streams its layers and the
// estimate says in what segments and how much it then holds at once (within the budget).
TEST(Cli, FitPrintShowsEachDevicesEstimateAndItsSegments) {
  const std::string model = kiln::test_data::path("segmented/llama-spm-e64-l6.gguf");
  const std::string base = "run -m " + model + " -p hi -c 256 --device sim0 --segmented -fitp on";
  const CliResult whole = run(base);
  ASSERT_EQ(whole.exit_code, 0) << whole.out;
  EXPECT_EQ(whole.out.find("kiln run: prompt"), std::string::npos) << "-fitp generates nothing\n" << whole.out;
  EXPECT_NE(whole.out.find("segmented: every device holds its layers (nothing to stream)\n"), std::string::npos)
      << whole.out;
  // "sim0: weights W, KV K, compute C, total T MiB (room R)"
  const size_t at = whole.out.find("sim0: weights ");
  ASSERT_NE(at, std::string::npos) << whole.out;
  const size_t total_at = whole.out.find(", total ", at);
  ASSERT_NE(total_at, std::string::npos) << whole.out;
  ASSERT_NE(whole.out.find(" MiB (room ", total_at), std::string::npos) << whole.out;
  const double total_mib = std::stod(whole.out.substr(total_at + 8));

  const double budget_mib = total_mib - 0.2;  // less than the whole, more than what stays + 2 layers
  const CliResult streamed = run(base + " --max-mem sim0=" + std::to_string(budget_mib / 1024));
  ASSERT_EQ(streamed.exit_code, 0) << streamed.out;
  EXPECT_NE(streamed.out.find("sim0 streams its layers in segments of "), std::string::npos) << streamed.out;
  const size_t peak_at = streamed.out.find(": at most ");
  ASSERT_NE(peak_at, std::string::npos) << streamed.out;
  EXPECT_NE(streamed.out.find("; its layers streamed in segments of "), std::string::npos) << streamed.out;
  const double peak_mib = std::stod(streamed.out.substr(peak_at + 10));
  EXPECT_LE(peak_mib, budget_mib + 0.01) << streamed.out;
  EXPECT_LT(peak_mib, total_mib) << streamed.out;
}

TEST(Cli, RunWithNgramDraftsOnTheLoopingDefaultModel) {
  const std::string base = "-p 'And God said unto Moses,' -n 64 --temp 0 -s 1 ";
  const RunOutput plain = run_text(base);
  const RunOutput spec = run_text(base + "--spec-type ngram-simple --spec-ngram-simple-size-n 2");
  EXPECT_EQ(spec.text, plain.text);
  EXPECT_GT(count_after(spec.speculative, "accepted "), 0) << spec.speculative;
}

std::string file_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// Lookup caches in llama.cpp's files: `kiln lookup-create` writes llama-lookup-create's bytes; a
// first `kiln run -lcd` writes llama-lookup's dynamic cache (same prompt, 66 greedy tokens:
// tests/llm/data/lookup/make_lookup_refs.sh); a second run reads it, drafts from it and adds its
// own counts; -lcs reads a static cache; the text never changes.
TEST(Cli, LookupCachesAreLlamaCppsFilesAndNeverChangeTheText) {
  const std::string refs = std::string(KILN_SOURCE_DIR) + "/tests/llm/data/lookup/";
  kiln::test::TempDir dir("kiln-lookup-");
  const std::string lcs = dir.path() + "/genesis.lcs", lcd = dir.path() + "/moses.lcd";
  const CliResult created = run("lookup-create -f " + refs + "genesis.txt -lcs " + lcs);
  ASSERT_EQ(created.exit_code, 0) << created.out;
  EXPECT_EQ(file_bytes(lcs), file_bytes(refs + "genesis-kjv.lcs")) << "not llama-lookup-create's bytes";

  const std::string base = "-p 'And God said unto Moses,' -n 66 --temp 0 -s 1 ";
  const RunOutput plain = run_text(base);
  const RunOutput first = run_text(base + "--spec-type ngram-cache -lcd " + lcd);
  EXPECT_EQ(first.text, plain.text);
  EXPECT_EQ(file_bytes(lcd), file_bytes(refs + "moses-kjv.lcd")) << "not llama-lookup's bytes";
  const RunOutput second = run_text(base + "--spec-type ngram-cache -lcd " + lcd);
  EXPECT_EQ(second.text, plain.text);
  EXPECT_GT(count_after(second.speculative, "accepted "), count_after(first.speculative, "accepted "))
      << first.speculative << " / " << second.speculative;
  EXPECT_EQ(file_bytes(lcd).size(), file_bytes(refs + "moses-kjv.lcd").size())
      << "the same text again: the same n-grams, higher counts";
  EXPECT_NE(file_bytes(lcd), file_bytes(refs + "moses-kjv.lcd"));
  const RunOutput both = run_text(base + "--spec-type ngram-cache -lcs " + lcs + " -lcd " + lcd);
  EXPECT_EQ(both.text, plain.text);

  std::ofstream(dir.path() + "/bad.lcs", std::ios::binary) << "abc";
  // A cache of a 32,000-token vocabulary for the default model's 3,072 tokens.
  const std::string other = dir.path() + "/other-vocab.lcs";
  ASSERT_EQ(run("lookup-create -m " + kModel + " -f " + refs + "genesis.txt -lcs " + other).exit_code, 0);
  const std::string run_hi = "run -p hi -n 2 ";
  const struct {
    std::string args, message;
  } bad[] = {
      {run_hi + "--spec-type ngram-cache -lcs " + dir.path() + "/missing.lcs", "-lcs " + dir.path() + "/missing.lcs: No such file"},
      {run_hi + "--spec-type ngram-cache -lcs " + dir.path() + "/bad.lcs", "not a lookup cache: truncated record"},
      {run_hi + "--spec-type ngram-simple -lcd " + lcd, "-lcd (a lookup cache) needs --spec-type ngram-cache"},
      {run_hi + "--spec-type ngram-cache -lcs " + other, "a token outside the model's vocabulary"},
      {"lookup-create -p hi", "give the file to write with -lcs OUT"},
  };
  for (const auto& c : bad) {
    const CliResult r = run(c.args);
    EXPECT_NE(r.exit_code, 0) << c.args;
    EXPECT_NE(r.out.find(c.message), std::string::npos) << c.args << "\n" << r.out;
  }
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

// llama-bench's flags: lists for -p and -n, -pg, and -o json (only JSON on standard output, one
// object per test with llama-bench's field names), jsonl and csv.
TEST(Cli, BenchSpeaksLlamaBenchsFlagsAndOutputs) {
  const CliResult r = run("bench -m " + kModel + " -p 8,16 -n 4 -pg 8,2 -r 2 -t 2 -o json", "2>/dev/null");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  const nlohmann::json j = nlohmann::json::parse(r.out);  // throws (fails) on anything but JSON
  ASSERT_TRUE(j.is_array());
  ASSERT_EQ(j.size(), 4u) << r.out;
  const std::pair<int, int> want[] = {{8, 0}, {16, 0}, {0, 4}, {8, 2}};
  for (size_t i = 0; i < 4; ++i) {
    const auto& t = j[i];
    EXPECT_EQ(t["n_prompt"], want[i].first) << t;
    EXPECT_EQ(t["n_gen"], want[i].second) << t;
    EXPECT_EQ(t["n_threads"], 2) << t;
    EXPECT_EQ(t["n_depth"], 0) << t;
    EXPECT_NE(t["model_filename"].get<std::string>().find("llama-spm-e128-f32"), std::string::npos) << t;
    EXPECT_GT(t["model_n_params"].get<int64_t>(), 0) << t;
    EXPECT_GT(t["model_size"].get<int64_t>(), 0) << t;
    ASSERT_EQ(t["samples_ts"].size(), 2u) << t;
    ASSERT_EQ(t["samples_ns"].size(), 2u) << t;
    const double avg = (t["samples_ts"][0].get<double>() + t["samples_ts"][1].get<double>()) / 2;
    EXPECT_NEAR(t["avg_ts"].get<double>(), avg, 1e-3 * avg) << t;
    // tokens / seconds: (n_prompt + n_gen) tokens per sample
    EXPECT_NEAR(t["samples_ts"][0].get<double>() * t["samples_ns"][0].get<double>() / 1e9,
                want[i].first + want[i].second, 1e-3)
        << t;
  }
  const CliResult lines = run("bench -m " + kModel + " -p 8 -n 0 -r 1 -t 2 -o jsonl", "2>/dev/null");
  ASSERT_EQ(lines.exit_code, 0) << lines.out;
  EXPECT_EQ(nlohmann::json::parse(lines.out)["n_prompt"], 8) << lines.out;
  const CliResult csv = run("bench -m " + kModel + " -p 0 -n 2 -r 1 -t 2 -o csv", "2>/dev/null");
  ASSERT_EQ(csv.exit_code, 0) << csv.out;
  EXPECT_EQ(csv.out.rfind("model_filename,model_type,model_size,model_n_params,", 0), 0u) << csv.out;
  EXPECT_EQ(std::count(csv.out.begin(), csv.out.end(), '\n'), 2) << csv.out;
  const CliResult md = run("bench -m " + kModel + " -p 0 -n 0 -pg 4,2 -r 1 -t 2");
  ASSERT_EQ(md.exit_code, 0) << md.out;
  EXPECT_NE(md.out.find("| pp4+tg2 |"), std::string::npos) << md.out;
}

// llama-bench's sweeps: -m, -mmp, -b, -ub, -ctk, -ctv, -fa, -t and -d take lists, and one run
// measures every combination, one record per test, in llama-bench's order of loops (model, mmap,
// n_batch, n_ubatch, type_k, type_v, flash_attn, threads, depth, then the tests).
TEST(Cli, BenchSweepsEveryCombinationInLlamaBenchsOrder) {
  const std::string qwen = kiln::test_data::path("models/qwen2-e64-Q8_0.gguf");
  const CliResult r = run("bench -m " + kModel + "," + qwen +
                              " -p 4 -n 2 -b 2,4 -t 1,2 -d 0,3 -ctk f32 -fa off -r 1 --no-warmup -o json",
                          "2>/dev/null");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j.size(), 2u * 2 * 2 * 2 * 2) << r.out;  // models x n_batch x threads x depths x (pp, tg)
  size_t i = 0;
  for (const std::string& model : {std::string("llama-spm-e128-f32"), std::string("qwen2-e64-Q8_0")})
    for (int n_batch : {2, 4})
      for (int n_threads : {1, 2})
        for (int depth : {0, 3})
          for (const auto& [n_prompt, n_gen] : {std::pair{4, 0}, std::pair{0, 2}}) {
            const auto& t = j[i++];
            EXPECT_NE(t["model_filename"].get<std::string>().find(model), std::string::npos) << t;
            EXPECT_EQ(t["n_batch"], n_batch) << t;
            EXPECT_EQ(t["n_ubatch"], 512) << t;
            EXPECT_EQ(t["n_threads"], n_threads) << t;
            EXPECT_EQ(t["n_depth"], depth) << t;
            EXPECT_EQ(t["n_prompt"], n_prompt) << t;
            EXPECT_EQ(t["n_gen"], n_gen) << t;
            EXPECT_EQ(t["type_k"], "f32") << t;
            EXPECT_EQ(t["type_v"], "f16") << t;
            EXPECT_EQ(t["flash_attn"], 0) << t;
            EXPECT_EQ(t["use_mmap"], true) << t;
            EXPECT_EQ(t["samples_ts"].size(), 1u) << t;
          }
  // llama.cpp's llama_model_desc: architecture, size class (none for these tiny shapes), file type.
  EXPECT_EQ(j[0]["model_type"], "llama ?B all F32");
  EXPECT_EQ(j[j.size() - 1]["model_type"], "qwen2 ?B Q8_0");

  const CliResult kv = run("bench -m " + kModel + " -p 4 -n 0 -mmp 0,1 -ctk f32,f16 -ctv f32 -fa on,auto -r 1 -o jsonl",
                           "2>/dev/null");
  ASSERT_EQ(kv.exit_code, 0) << kv.out;
  std::istringstream lines(kv.out);
  std::string line;
  i = 0;
  for (bool mmap : {false, true})
    for (const char* type_k : {"f32", "f16"})
      for (int fa : {1, -1}) {
        ASSERT_TRUE(std::getline(lines, line)) << kv.out;
        const nlohmann::json t = nlohmann::json::parse(line);
        EXPECT_EQ(t["use_mmap"], mmap) << t;
        EXPECT_EQ(t["type_k"], type_k) << t;
        EXPECT_EQ(t["type_v"], "f32") << t;
        EXPECT_EQ(t["flash_attn"], fa) << t;
        ++i;
      }
  EXPECT_FALSE(std::getline(lines, line)) << kv.out;

  // The table shows the swept columns (llama-bench's names) and the depth in the test's name.
  const CliResult md = run("bench -m " + kModel + " -p 4 -n 2 --streams 1,2 -t 1,2 -ub 2 -d 3 -r 1", "2>/dev/null");
  ASSERT_EQ(md.exit_code, 0) << md.out;
  EXPECT_NE(md.out.find("| model | size | params | backend | threads | n_ubatch | test |"), std::string::npos)
      << md.out;
  EXPECT_NE(md.out.find("| cpu | 1 | 2 | pp4 @ d3 |"), std::string::npos) << md.out;
  EXPECT_NE(md.out.find("| cpu | 2 | 2 | tg2 x2 @ d3 |"), std::string::npos) << md.out;
  EXPECT_NE(md.out.find("vs tg2 @ d3 |"), std::string::npos) << md.out;
}

// The placement flags take llama-bench's lists: -ngl (ranges too), -sm, -mg, -ts (shares within one
// value separated by '/'), -ot (overrides within one value separated by ';'), -nkvo; each
// combination in llama-bench's order with its fields; the table shows ngl on an offload device.
TEST(Cli, BenchSweepsThePlacementFlags) {
  const CliResult r = run("bench -m " + kModel + " --device sim0,sim1 -p 4 -n 0 -ngl 0,1-2 -ts 1/1,3/1 "
                              "-ot 'ffn_up=cpu;ffn_down=cpu,' -nkvo 0,1 -r 1 --no-warmup -o jsonl",
                          "2>/dev/null");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  std::istringstream lines(r.out);
  std::string line;
  for (int ngl : {0, 1, 2})
    for (const char* ts : {"1.00/1.00", "3.00/1.00"})
      for (const char* ot : {"ffn_up=cpu;ffn_down=cpu", "none"})
        for (bool nkvo : {false, true}) {
          ASSERT_TRUE(std::getline(lines, line)) << r.out;
          const nlohmann::json t = nlohmann::json::parse(line);
          EXPECT_EQ(t["n_gpu_layers"], ngl) << t;
          EXPECT_EQ(t["tensor_split"], ts) << t;
          EXPECT_EQ(t["tensor_buft_overrides"], ot) << t;
          EXPECT_EQ(t["no_kv_offload"], nkvo) << t;
          EXPECT_EQ(t["split_mode"], "layer") << t;
          EXPECT_EQ(t["main_gpu"], 0) << t;
        }
  EXPECT_FALSE(std::getline(lines, line)) << r.out;

  const CliResult md = run("bench -m " + kModel + " --device sim0 -p 4 -n 0 -ngl 1 -sm none -r 1", "2>/dev/null");
  ASSERT_EQ(md.exit_code, 0) << md.out;
  EXPECT_NE(md.out.find("| model | size | params | backend | threads | ngl | sm | test |"), std::string::npos)
      << md.out;
  EXPECT_NE(md.out.find("| sim0 | 2 | 1 | none | pp4 |"), std::string::npos) << md.out;
  const CliResult bad = run("bench -m " + kModel + " --device sim0 -ngl 3-1 -r 1", "2>&1");
  EXPECT_EQ(bad.exit_code, 2) << bad.out;
  EXPECT_NE(bad.out.find("is not a range"), std::string::npos) << bad.out;
}

// -d N: each test starts with N tokens in the KV cache. The context must hold the depth and the
// test (a larger depth is refused before anything runs), and every run starts from the same depth
// (-r 3 in a context of exactly depth + test cells: leftovers of a run would overflow it).
TEST(Cli, BenchDepthFillsTheCacheBeforeEachTest) {
  const CliResult fits = run("bench -m " + kModel + " -p 8 -n 4 --streams 1,2 -pg 4,4 -d 16 -c 24 -r 3 -o json",
                             "2>/dev/null");
  ASSERT_EQ(fits.exit_code, 0) << fits.out;
  const nlohmann::json j = nlohmann::json::parse(fits.out);
  ASSERT_EQ(j.size(), 4u) << fits.out;  // pp8, tg4, tg4 x2, pp4+tg4
  for (const auto& t : j) {
    EXPECT_EQ(t["n_depth"], 16) << t;
    EXPECT_EQ(t["samples_ns"].size(), 3u) << t;
  }
  EXPECT_EQ(j[2]["n_streams"], 2) << j[2];
  EXPECT_EQ(j[3]["n_prompt"], 4) << j[3];
  const CliResult too_deep = run("bench -m " + kModel + " -p 8 -n 4 -d 0,17 -c 24 -r 1");
  EXPECT_EQ(too_deep.exit_code, 1) << too_deep.out;
  EXPECT_NE(too_deep.out.find("kiln bench: -d 17: the tests at that depth need 25 cells, the context has 24 "
                              "(raise -c)"),
            std::string::npos)
      << too_deep.out;
  EXPECT_EQ(too_deep.out.find("| pp8 |"), std::string::npos) << too_deep.out;  // nothing ran
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
  EXPECT_NE(bench.out.find("| sim0 |"), std::string::npos) << bench.out;
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

// On a machine without a Vulkan driver (the loader pointed at none), --list-devices prints the CPU
// and says why there is no Vulkan device; a model placed on vulkan0 is refused with that reason.
TEST(Cli, NoVulkanDriverListsTheCpuAndSaysSo) {
  const std::string no_driver = "VK_ICD_FILENAMES=/nonexistent.json VK_DRIVER_FILES=/nonexistent.json ";
  const CliResult r = kiln::test::run_shell(no_driver + kKiln + " run --list-devices 2>&1");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_EQ(r.out.rfind("Available devices:\n  cpu: cpu, host RAM (", 0), 0u) << r.out;
  EXPECT_EQ(r.out.find("vulkan0"), std::string::npos) << r.out;
#ifdef KILN_HAVE_VULKAN
  EXPECT_NE(r.out.find("(no Vulkan device found: vulkan: no Vulkan driver"), std::string::npos) << r.out;
#else
  EXPECT_NE(r.out.find("(this build has no Vulkan backend"), std::string::npos) << r.out;
#endif
  const CliResult placed =
      kiln::test::run_shell(no_driver + kKiln + " run -p hi -n 1 --device vulkan0 2>&1");
  EXPECT_EQ(placed.exit_code, 1) << placed.out;
  EXPECT_NE(placed.out.find("no device 'vulkan0'"), std::string::npos) << placed.out;
}

// Values that make no sense are refused while the options are parsed, before any model is read
// (-m names no file): exit code 2 and one line naming the flag and the value.
TEST(Cli, NonsenseValuesAreRefusedWithOneLine) {
  const std::string m = " -m /nonexistent.gguf -p hi";
  const std::pair<std::string, std::string> cases[] = {
      {"run --temp nan" + m, "kiln run: --temp: 'nan' is not a finite number\n"},
      {"run --temp -inf" + m, "kiln run: --temp: '-inf' is not a finite number\n"},
      {"run --presence-penalty 1e999" + m, "kiln run: --presence-penalty: '1e999' is not a finite number\n"},
      {"run --top-p 2" + m, "kiln run: --top-p: '2' must be in 0..1\n"},
      {"run --min-p -0.5" + m, "kiln run: --min-p: '-0.5' must be in 0..1\n"},
      {"run --repeat-penalty 0" + m, "kiln run: --repeat-penalty: '0' must be greater than 0\n"},
      {"run -c -5" + m, "kiln run: -c: '-5' must be in 0..2147483647\n"},
      {"run -b 0" + m, "kiln run: -b: '0' must be at least 1\n"},
      {"run -ub 0" + m, "kiln run: -ub: '0' must be at least 1\n"},
      {"run --top-k 99999999999" + m,
       "kiln run: --top-k: '99999999999' must be in -2147483648..2147483647\n"},
      {"run -n -3" + m, "kiln run: -n: '-3' must be at least -2\n"},
      {"run --keep -2" + m, "kiln run: --keep: '-2' must be at least -1\n"},
      {"run -t 100000" + m, "kiln run: -t: '100000' must be at most 512\n"},
      {"run -s -2" + m, "kiln run: -s: '-2' must be at least -1\n"},
      {"run --repeat-last-n -2" + m, "kiln run: --repeat-last-n: '-2' must be at least -1\n"},
      {"run --logit-bias 5+nan" + m,
       "kiln run: --logit-bias: '5+nan' is not TOKEN+BIAS or TOKEN-BIAS (BIAS: a number or inf)\n"},
      {"chat -n -2" + m, "kiln chat: -n: '-2' must be at least -1\n"},
      {"serve --port 99999 -m /nonexistent.gguf", "kiln serve: --port: '99999' must be in 0..65535\n"},
      {"serve --port -1 -m /nonexistent.gguf", "kiln serve: --port: '-1' must be in 0..65535\n"},
      {"serve -np 0 -m /nonexistent.gguf", "kiln serve: -np: '0' must be -1 or in 1..64\n"},
      {"serve --media-path /nonexistent/folder -m /nonexistent.gguf",
       "kiln serve: --media-path: '/nonexistent/folder' is not a folder\n"},
      {"perplexity --chunks 0 -m /nonexistent.gguf -f x.txt",
       "kiln perplexity: --chunks: '0' must be -1 or at least 1\n"},
      {"bench -r 0 -m /nonexistent.gguf", "kiln bench: -r: '0' must be at least 1\n"},
      {"bench --streams 1,0 -m /nonexistent.gguf",
       "kiln bench: --streams: '0' must be in 1..64 (stream counts)\n"},
      {"bench -o xml -m /nonexistent.gguf", "kiln bench: -o: 'xml' is not one of md, csv, json, jsonl\n"},
      {"bench -pg 8 -m /nonexistent.gguf", "kiln bench: -pg: give P,N (prompt and generated tokens)\n"},
      {"bench -ctk f16,q8_0 -m /nonexistent.gguf",
       "kiln bench: -ctk: cache type 'q8_0' is not supported (kiln's KV cache holds f32 or f16)\n"},
      {"bench -ctv q4_1 -m /nonexistent.gguf",
       "kiln bench: -ctv: cache type 'q4_1' is not supported (kiln's KV cache holds f32 or f16)\n"},
      {"bench -fa on,2 -m /nonexistent.gguf", "kiln bench: -fa: '2' is not on, off or auto\n"},
      {"bench -mmp 1,2 -m /nonexistent.gguf", "kiln bench: -mmp: '2' must be in 0..1\n"},
      {"bench -d -1 -m /nonexistent.gguf", "kiln bench: -d: '-1' must be at least 0\n"},
      {"bench -t 1,x -m /nonexistent.gguf", "kiln bench: -t: 'x' is not an integer\n"},
      {"bench -b 0 -m /nonexistent.gguf", "kiln bench: -b: '0' must be at least 1\n"},
      {"bench -m a.gguf, -p 8", "kiln bench: -m: an empty model path\n"},
      {"bench --no-mmap -mmp 1 -m /nonexistent.gguf", "kiln bench: give -mmp or --no-mmap, not both\n"},
      {"bench -t 1,2 -md /nonexistent.gguf -m /nonexistent.gguf",
       "kiln bench: speculative decoding and image tests run with one model and one value of each swept flag, "
       "at depth 0\n"},
      {"quantize in.gguf out.gguf Q4_0 -t x", "kiln quantize: -t: 'x' is not an integer\n"},
  };
  for (const auto& [args, want] : cases) {
    const CliResult r = run(args);
    EXPECT_EQ(r.exit_code, 2) << args << "\n" << r.out;
    EXPECT_EQ(r.out, want) << args;
  }
}

// llama.cpp's special values keep their meaning: --temp 0 or less is greedy, -t 0 or less uses
// every core, --top-k 0 or less / --top-p 1 / --min-p 0 switch those samplers off, --keep -1 and
// --repeat-last-n -1 mean all.
TEST(Cli, LlamaCppSpecialValuesKeepTheirMeaning) {
  const std::string base = "run -p 'And God said' -n 8 -s 3 --no-display-prompt";
  const CliResult greedy = run(base + " --temp 0 -t 2", "2>/dev/null");
  ASSERT_EQ(greedy.exit_code, 0);
  const CliResult same = run(
      base + " --temp -1 -t 0 --top-k -5 --top-p 1 --min-p 0 --keep -1 --repeat-last-n -1", "2>/dev/null");
  ASSERT_EQ(same.exit_code, 0);
  EXPECT_EQ(same.out, greedy.out);
  const CliResult all_cores = run(base + " --temp 0 -t -1", "2>/dev/null");
  EXPECT_EQ(all_cores.out, greedy.out);
}

// -c 0 is the model's whole training context (128 tokens for the embedded model); -n -2 generates
// until the context is full, context shift or not; a context beyond the training context warns
// as llama.cpp does.
TEST(Cli, ContextSizesFollowLlamaCpp) {
  const CliResult full = run("run -c 0 -n -2 --context-shift --ignore-eos --temp 0 -t 2 -p 'And God said'");
  ASSERT_EQ(full.exit_code, 0) << full.out;
  EXPECT_NE(full.out.find("kiln run: the context of 128 tokens is full"), std::string::npos) << full.out;
  EXPECT_EQ(full.out.find("warning"), std::string::npos) << full.out;
  const CliResult big = run("run -c 256 -n 1 -t 2 -p 'And God said'");
  ASSERT_EQ(big.exit_code, 0) << big.out;
  EXPECT_NE(big.out.find("kiln run: warning: the context of 256 tokens is larger than the model's training "
                         "context (128): possible training context overflow\n"),
            std::string::npos)
      << big.out;
}

// The embedded model ends its greedy "And God said" with its end-of-text token after 8 tokens;
// --ignore-eos (llama.cpp's flag) never samples an end-of-generation token, so -n is reached,
// with the stopped text first.
TEST(Cli, IgnoreEosRunsToTheLimit) {
  const std::string args = "run -n 30 --temp 0 -t 1 -p 'And God said'";
  const std::string ignoring = "run -n 30 --ignore-eos --temp 0 -t 1 -p 'And God said'";
  // stdout: the text (and a final newline); stderr: the timing line.
  const CliResult stopped = run(args, "2>/dev/null");
  const CliResult full = run(ignoring, "2>/dev/null");
  ASSERT_EQ(stopped.exit_code, 0) << stopped.out;
  ASSERT_EQ(full.exit_code, 0) << full.out;
  EXPECT_EQ(run(args, "2>&1 >/dev/null").out.find("generated 30 tokens"), std::string::npos)
      << "the model no longer stops early on this prompt: pick another";
  EXPECT_NE(run(ignoring, "2>&1 >/dev/null").out.find("generated 30 tokens"), std::string::npos);
  ASSERT_FALSE(stopped.out.empty());
  const std::string stopped_text = stopped.out.substr(0, stopped.out.size() - 1);  // without the newline
  EXPECT_GT(full.out.size(), stopped.out.size());
  EXPECT_EQ(full.out.rfind(stopped_text, 0), 0u) << full.out;
}

TEST(Cli, VersionAndHelp) {
  const CliResult v = run("--version");
  ASSERT_EQ(v.exit_code, 0) << v.out;
  EXPECT_TRUE(v.out.starts_with("kiln 0.1.0 (commit ")) << v.out;
  EXPECT_NE(v.out.find("\nbuilt with "), std::string::npos) << v.out;
  EXPECT_NE(v.out.find("\ncpu kernels: "), std::string::npos) << v.out;

  const CliResult list = run("help");
  ASSERT_EQ(list.exit_code, 0);
  for (const std::string command :
       {"bench", "chat", "convert", "inspect", "perplexity", "quantize", "run", "serve", "tokenize"}) {
    SCOPED_TRACE(command);
    EXPECT_NE(list.out.find("\n  " + command + " "), std::string::npos) << list.out;
    const CliResult h = run(command + " --help");
    ASSERT_EQ(h.exit_code, 0) << h.out;
    // One layout: usage, then (optionally) a description and the arguments, then the options.
    EXPECT_TRUE(h.out.starts_with("usage: kiln " + command + " ")) << h.out;
    EXPECT_NE(h.out.find("\n\noptions:\n"), std::string::npos) << h.out;
    EXPECT_NE(h.out.find("\n  -h, --help "), std::string::npos) << h.out;
    EXPECT_EQ(run("help " + command).out, h.out);
  }
  EXPECT_NE(run("perplexity --help").out.find("context size in tokens (default: 512;"), std::string::npos);
  const CliResult unknown = run("help frobnicate");
  EXPECT_EQ(unknown.exit_code, 2);
  EXPECT_NE(unknown.out.find("kiln: unknown command 'frobnicate'"), std::string::npos) << unknown.out;
}

// `kiln COMMAND: what went wrong`: no internal names, no prefix twice.
TEST(Cli, ErrorsHaveOneFormat) {
  const std::string dir = std::string(KILN_BINARY_DIR) + "/cli_test_errors";
  std::filesystem::create_directories(dir);
  const std::pair<std::string, std::string> cases[] = {
      {"quantize /nonexistent.gguf " + dir + "/out.gguf Q4_0",
       "kiln quantize: cannot open '/nonexistent.gguf': No such file or directory\n"},
      {"quantize " + kiln::test_data::path("models/llama-spm-e256-Q4_0.gguf") + " " + dir + "/out.gguf Q8_0",
       "kiln quantize: tensor 'output.weight' is q6_K; converting it to q8_0 is not supported "
       "(requantizing is refused, as llama.cpp does by default: quantize from F32, F16 or BF16)\n"},
      {"convert " + dir + " " + dir + "/out.gguf", "kiln convert: cannot open '" + dir + "/config.json'\n"},
      {"quantize " + kModel + " /nonexistent/out.gguf Q4_0",
       "kiln quantize: cannot write '/nonexistent/out.gguf': the folder '/nonexistent' does not exist\n"},
      {"perplexity -m " + kModel + " -f " + std::string(KILN_SOURCE_DIR) +
           "/tests/convert/data/heldout_jude_rev1-3.txt -c 64 --kl-divergence-base /nonexistent/base.kld",
       "kiln perplexity: cannot write '/nonexistent/base.kld': the folder '/nonexistent' does not exist\n"},
      {"convert " + dir,
       "kiln convert: missing OUT.gguf, the GGUF file to write (see kiln convert --help)\n"},
      {"convert " + dir + " /nonexistent/out.gguf",
       "kiln convert: cannot write '/nonexistent/out.gguf': the folder '/nonexistent' does not exist\n"},
      {"inspect", "kiln inspect: missing FILE, a GGUF file (see kiln inspect --help)\n"},
      {"inspect a.gguf b.gguf", "kiln inspect: unexpected argument 'b.gguf' (see kiln inspect --help)\n"},
      {"tokenize -p hi -f x.txt", "kiln tokenize: give the text with -p or -f (one of them)\n"},
  };
  for (const auto& [args, want] : cases) {
    const CliResult r = run(args, "2>&1 >/dev/null");
    EXPECT_NE(r.exit_code, 0) << args;
    const size_t last_line = r.out.rfind('\n', r.out.size() - 2);  // stderr's last line
    EXPECT_EQ(r.out.substr(last_line == std::string::npos ? 0 : last_line + 1), want) << args;
  }
  std::filesystem::remove_all(dir);
}

// A GGUF that ends early says it is truncated: an incomplete download, most likely.
TEST(Cli, TruncatedModelSaysSo) {
  std::ifstream in(kModel, std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const std::string path = std::string(KILN_BINARY_DIR) + "/cli_test_truncated.gguf";
  const size_t cut_data = bytes.size() - 1000, cut_metadata = 4000;
  std::ofstream(path, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(cut_data));
  const CliResult data = run("run -m " + path + " -p hi");
  EXPECT_EQ(data.exit_code, 1);
  EXPECT_NE(data.out.find("kiln run: gguf: '" + path + "': truncated: the file has " +
                          std::to_string(cut_data) + " bytes, its tensor data needs " +
                          std::to_string(bytes.size()) + " (an incomplete download?); tensor '"),
            std::string::npos)
      << data.out;
  std::ofstream(path, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(cut_metadata));
  const CliResult meta = run("inspect " + path);
  EXPECT_EQ(meta.exit_code, 1);
  EXPECT_NE(meta.out.find("kiln inspect: gguf: '" + path +
                          "': truncated: the file has 4000 bytes and ends inside "
                          "its metadata (an incomplete download?); key '"),
            std::string::npos)
      << meta.out;
  std::remove(path.c_str());
}

TEST(Cli, TokenizeFallsBackToTheEmbeddedModel) {
  const CliResult embedded = run("tokenize -p 'And God said' --ids");
  ASSERT_EQ(embedded.exit_code, 0) << embedded.out;
  const CliResult file = run("tokenize -m " + std::string(KILN_SOURCE_DIR) +
                             "/models/kjv-llama-q8_0.gguf -p 'And God said' --ids");
  ASSERT_EQ(file.exit_code, 0) << file.out;
  EXPECT_EQ(embedded.out, file.out);
  EXPECT_TRUE(embedded.out.starts_with("[1, ")) << embedded.out;
}

// -r/--reverse-prompt: generation stops where the text ends with one of the reverse prompts (as
// llama.cpp's completion tool: allowing up to 2 bytes after it); -r repeats.
TEST(Cli, RunStopsAtAReversePrompt) {
  const std::string base = "run -p 'And God said unto Moses,' -n 48 --temp 0 -t 2 --no-display-prompt";
  const CliResult full = run(base, "2>/dev/null");
  ASSERT_EQ(full.exit_code, 0);
  // A word of the continuation, after its first few bytes, followed by a space: tokens end there.
  std::string word;
  size_t end = 0;
  for (size_t i = 8; i + 1 < full.out.size() && word.empty(); ++i) {
    if (!std::isalpha(static_cast<unsigned char>(full.out[i])) ||
        std::isalpha(static_cast<unsigned char>(full.out[i - 1])))
      continue;
    size_t j = i;
    while (j < full.out.size() && std::isalpha(static_cast<unsigned char>(full.out[j]))) ++j;
    if (j - i >= 3 && j < full.out.size() && full.out[j] == ' ' &&
        full.out.find(full.out.substr(i, j - i)) == i) {
      word = full.out.substr(i, j - i);
      end = j;
    }
  }
  ASSERT_FALSE(word.empty()) << full.out;
  const CliResult stopped = run(base + " -r 'no such text' -r '" + word + "'", "2>/dev/null");
  ASSERT_EQ(stopped.exit_code, 0);
  EXPECT_EQ(stopped.out, full.out.substr(0, end) + "\n") << "reverse prompt '" << word << "'";
}

}  // namespace
