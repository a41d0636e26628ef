// `kiln bench`: prompt processing and generation speed of a model, as llama-bench measures them,
// plus batched generation with several streams (what `kiln serve` does with concurrent clients).
//   kiln bench [-m MODEL.gguf] [-p 512] [-n 128] [--streams 1,8] [-r 5] [model flags]
// Tests, each on an emptied KV cache, with random token ids (fixed seed):
//   pp P    one sequence, P prompt tokens decoded in n_batch-sized calls, logits for the last only
//   tg N    one sequence, N tokens decoded one call each (a batch of 1)
//   tg N xS S sequences generating together: N calls, each a batch of S tokens (one per stream);
//           reported as aggregate tokens/s (S*N tokens / time)
// Rounds interleave the tests (pp, tg x1, tg xS, pp, ...) so that a noisy machine slows them alike;
// the table gives each test's median and range over the rounds, and for each batched test the
// median over rounds of its ratio to the single stream of the same round.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <random>
#include <sstream>

#include "command.h"
#include "llm/cpu_engine.h"
#include "messages.h"
#include "model_flags.h"

namespace kiln::cli {
namespace {

using Clock = std::chrono::steady_clock;

struct BenchTest {
  std::string name;
  int64_t n_tokens;  // tokens per run (for tokens/s)
  int32_t n_streams; // 0: prompt processing
  std::vector<double> seconds;
};

// Prompt processing: n_prompt tokens of sequence 0 from position 0.
Status run_pp(Context& ctx, std::mt19937& rng, int64_t n_prompt, size_t n_batch) {
  std::uniform_int_distribution<int32_t> token(0, static_cast<int32_t>(ctx.n_vocab() - 1));
  Batch batch;
  for (int64_t begin = 0; begin < n_prompt; begin += static_cast<int64_t>(n_batch)) {
    const int64_t end = std::min<int64_t>(n_prompt, begin + static_cast<int64_t>(n_batch));
    batch.clear();
    for (int64_t i = begin; i < end; ++i) batch.add(token(rng), static_cast<int32_t>(i), 0, i + 1 == n_prompt);
    KILN_TRY(ctx.decode(batch));
  }
  return {};
}

// Generation: n_gen steps, each one token for every one of n_streams sequences.
Status run_tg(Context& ctx, std::mt19937& rng, int64_t n_gen, int32_t n_streams) {
  std::uniform_int_distribution<int32_t> token(0, static_cast<int32_t>(ctx.n_vocab() - 1));
  Batch batch;
  for (int64_t step = 0; step < n_gen; ++step) {
    batch.clear();
    for (int32_t s = 0; s < n_streams; ++s) batch.add(token(rng), static_cast<int32_t>(step), s, true);
    KILN_TRY(ctx.decode(batch));
  }
  return {};
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

std::string parse_streams(const std::string& v, std::vector<int32_t>* out) {
  out->clear();
  std::stringstream ss(v);
  std::string item;
  while (std::getline(ss, item, ',')) {
    int64_t s = 0;
    if (std::string err = parse_integer(item, IntRange::between(1, kMaxSequences), &s); !err.empty())
      return err + " (stream counts)";
    out->push_back(static_cast<int32_t>(s));
  }
  if (out->empty()) return "give at least one stream count";
  return "";
}

int run_bench(int argc, char** argv) {
  ModelFlags mf;
  mf.ctx_default = "what the tests need";
  int64_t n_prompt = 512, n_gen = 128;
  int32_t rounds = 5;
  std::vector<int32_t> streams = {1};
  OptionParser p("bench", "kiln bench [-m MODEL.gguf] [-p N] [-n N] [--streams 1,8] [-r N] [options]");
  mf.declare(p);
  p.description(
      "Measures prompt processing (pp) and generation (tg) speed as llama-bench does, plus batched\n"
      "generation with several streams (tg xS), in interleaved rounds; prints medians and ranges.");
  p.value({"-p", "--n-prompt"}, &n_prompt, "N", "prompt tokens of the pp test (default 512; 0: no pp test)",
          IntRange::at_least(0));
  p.value({"-n", "--n-gen"}, &n_gen, "N",
          "generated tokens per stream of the tg tests (default 128; 0: none)", IntRange::at_least(0));
  p.custom({"--streams"}, [&](const std::string& v) { return parse_streams(v, &streams); }, "S1,S2,...",
           "stream counts of the tg tests (default 1)");
  p.value({"-r", "--repetitions"}, &rounds, "N", "rounds (default 5)", IntRange::at_least(1));
  if (auto code = p.parse(argc, argv)) return *code;
  if (n_prompt == 0 && n_gen == 0) return fail("bench", "nothing to run (-p 0 and -n 0)", 2);
  auto model = mf.load_model("bench");
  if (!model) return 1;

  int32_t max_streams = *std::max_element(streams.begin(), streams.end());
  ContextOptions& co = mf.context;
  if (co.n_ctx == 0) co.n_ctx = std::max<int64_t>({n_prompt, n_gen * max_streams, 16});
  CpuEngine engine(mf.threads);
  auto ctx_ptr = mf.create_context("bench", model, engine.backend);
  if (!ctx_ptr) return 1;
  Context& ctx = *ctx_ptr;
  if (n_prompt > ctx.n_ctx() || n_gen * max_streams > ctx.n_ctx()) {
    return fail("bench", "the tests need " + std::to_string(std::max(n_prompt, n_gen * max_streams)) +
                             " cells, the context has " + std::to_string(ctx.n_ctx()) + " (raise -c)");
  }

  std::vector<BenchTest> tests;
  if (n_prompt > 0) tests.push_back({"pp" + std::to_string(n_prompt), n_prompt, 0, {}});
  if (n_gen > 0)
    for (int32_t s : streams)
      tests.push_back(
          {"tg" + std::to_string(n_gen) + (s > 1 ? " x" + std::to_string(s) : ""), n_gen * s, s, {}});

  std::mt19937 rng(1234);
  auto run_once = [&](const BenchTest& t) -> Result<double> {
    ctx.clear();
    const auto t0 = Clock::now();
    if (t.n_streams == 0)
      KILN_TRY(run_pp(ctx, rng, n_prompt, static_cast<size_t>(co.n_batch)));
    else
      KILN_TRY(run_tg(ctx, rng, n_gen, t.n_streams));
    return std::chrono::duration<double>(Clock::now() - t0).count();
  };
  // Warm-up: pages the weights in and touches the compute arena.
  {
    ctx.clear();
    if (const Status st = run_tg(ctx, rng, 2, max_streams); !st.ok())
      return fail("bench", st.error().message);
  }
  for (int32_t r = 0; r < rounds; ++r) {
    for (BenchTest& t : tests) {
      auto s = run_once(t);
      if (!s.ok()) return fail("bench", t.name + ": " + s.error().message);
      t.seconds.push_back(*s);
    }
    std::fprintf(stderr, "kiln bench: round %d/%d done\n", r + 1, rounds);
  }

  std::printf("model: %s, %lld threads, %d rounds (interleaved), n_batch %lld, n_ubatch %lld\n\n",
              model->name().c_str(), static_cast<long long>(engine.pool.n_threads()), rounds,
              static_cast<long long>(co.n_batch), static_cast<long long>(co.n_ubatch));
  std::printf("| test | t/s (median) | t/s (min .. max) | vs tg x1 (median ratio) |\n|---|---:|---:|---:|\n");
  auto tokens_per_second = [](const BenchTest& t, size_t r) { return static_cast<double>(t.n_tokens) / t.seconds[r]; };
  const auto single = std::find_if(tests.begin(), tests.end(), [](const BenchTest& t) { return t.n_streams == 1; });
  for (const BenchTest& t : tests) {
    std::vector<double> tps, ratios;
    for (size_t r = 0; r < t.seconds.size(); ++r) {
      tps.push_back(tokens_per_second(t, r));
      // The ratio of the same round: both ran back to back under the same machine load.
      if (single != tests.end() && t.n_streams > 1) ratios.push_back(tps.back() / tokens_per_second(*single, r));
    }
    std::string ratio;
    if (!ratios.empty()) {
      char buf[32];
      std::snprintf(buf, sizeof buf, "%.2fx", median(ratios));
      ratio = buf;
    }
    std::printf("| %s | %.2f | %.2f .. %.2f | %s |\n", t.name.c_str(), median(tps),
                *std::min_element(tps.begin(), tps.end()), *std::max_element(tps.begin(), tps.end()), ratio.c_str());
  }
  return 0;
}

}  // namespace

KILN_COMMAND(bench, "speed of prompt processing and (batched) generation, as llama-bench", run_bench);

}  // namespace kiln::cli
