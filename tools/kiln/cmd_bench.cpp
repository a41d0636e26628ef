// `kiln bench`: prompt processing and generation speed of a model, as llama-bench measures them,
// plus batched generation with several streams (what `kiln serve` does with concurrent clients).
//   kiln bench [-m MODEL.gguf] [-p 512] [-n 128] [--streams 1,8] [-r 5] [model flags]
//              [--mmproj MMPROJ.gguf --image IMG]
// Tests, each on an emptied KV cache, with random token ids (fixed seed):
//   pp P    one sequence, P prompt tokens decoded in n_batch-sized calls, logits for the last only
//   tg N    one sequence, N tokens decoded one call each (a batch of 1)
//   tg N xS S sequences generating together: N calls, each a batch of S tokens (one per stream);
//           reported as aggregate tokens/s (S*N tokens / time)
//   img WxH with --mmproj and --image: the image encoded (the encoder graph on the prepared image,
//           no embedding cache) in the compute arena the decoder shares; t/s are image tokens/s,
//           and the ratio column gives the median milliseconds per image
// With speculative decoding flags (--spec-type, -md, ...), two more:
//   gen N       N tokens generated greedily after a prompt (-f FILE, else a fixed sentence), one
//               decode per token (end-of-generation tokens banned, so every run makes N)
//   gen N spec  the same with speculation; its ratio to gen N, the tokens drafted and accepted,
//               and whether both made the same tokens (they must) are printed
//   Both time the generation only (the prompt and the draft model's prefill excluded, as
//   llama-speculative-simple does).
// Rounds interleave the tests (pp, tg x1, tg xS, pp, ...) so that a noisy machine slows them alike;
// the table gives each test's median and range over the rounds, and for each batched test the
// median over rounds of its ratio to the single stream of the same round.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <random>
#include <sstream>

#include "command.h"
#include "generation.h"
#include "media_flags.h"
#include "messages.h"
#include "model_flags.h"
#include "speculative_flags.h"
#include "user_files.h"

namespace kiln::cli {
namespace {

using Clock = std::chrono::steady_clock;

enum class TestKind { Prompt, Generation, Greedy, GreedySpeculative, Image };

struct BenchTest {
  std::string name;
  int64_t n_tokens;  // tokens per run (for tokens/s)
  TestKind kind;
  int32_t n_streams;  // Generation: streams
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

struct GreedyRun {
  std::vector<int32_t> tokens;  // the generated tokens
  double seconds = 0;           // of generation
  int64_t drafted = 0, accepted = 0;
};

// Greedy generation of n_gen tokens after `prompt` in sequence 0 of the (cleared) context, with
// drafts from `speculator` when it is set.
Result<GreedyRun> run_greedy(Context& ctx, Speculator* speculator, std::span<const int32_t> prompt,
                             int64_t n_gen, int64_t n_batch) {
  ctx.clear();
  SamplerParams sp;
  sp.temperature = 0.0f;
  for (int32_t id : ctx.model().tokenizer().vocab().eog_ids()) sp.logit_bias.emplace_back(id, -INFINITY);
  KILN_ASSIGN_OR_RETURN(Sampler sampler, Sampler::create(sp, static_cast<int32_t>(ctx.n_vocab())));
  SequenceState state;
  KILN_ASSIGN_OR_RETURN(const size_t last, decode_tokens(ctx, prompt, state, n_batch));
  for (int32_t t : prompt) sampler.accept(t);
  const auto drafter = speculator ? speculator->drafter(state.seq) : nullptr;
  if (drafter) KILN_TRY(drafter->begin(state.tokens));
  GreedyRun run;
  const auto t0 = Clock::now();
  KILN_ASSIGN_OR_RETURN(run.tokens,
                        generate_tokens(ctx, state, sampler, ctx.logits(last), n_gen, drafter.get()));
  run.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  if (drafter) {
    run.drafted = drafter->n_drafted();
    run.accepted = drafter->n_accepted();
  }
  return run;
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
  SpeculativeFlags spf;
  MediaFlags media;
  mf.ctx_default = "what the tests need";
  int64_t n_prompt = 512, n_gen = 128;
  int32_t rounds = 5;
  std::vector<int32_t> streams = {1};
  std::string prompt_file;
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
  p.value({"-f", "--file"}, &prompt_file, "FILE",
          "prompt of the gen tests run with speculative decoding flags (default: a fixed sentence)");
  spf.declare(p);
  media.declare(p);
  if (auto code = p.parse(argc, argv)) return *code;
  if (auto code = mf.list_devices_if_asked("bench")) return *code;
  if (n_prompt == 0 && n_gen == 0 && media.images.empty())
    return fail("bench", "nothing to run (-p 0 and -n 0, no --image)", 2);
  if (media.images.size() > 1) return fail("bench", "give one --image", 2);
  auto model = mf.load_model("bench");
  if (!model) return 1;
  auto vision = media.load_vision(*model);
  if (!vision.ok()) {
    std::fprintf(stderr, "kiln bench: %s\n", vision.error().message.c_str());
    return 1;
  }
  if (*vision && media.images.empty()) {
    std::fprintf(stderr, "kiln bench: --mmproj needs an --image to encode\n");
    return 2;
  }
  std::string prompt_text = "The quick brown fox jumps over the lazy dog.";
  if (!read_file_option(prompt_file, "bench", &prompt_text)) return 1;
  const std::vector<int32_t> gen_prompt = model->tokenizer().tokenize(prompt_text, true, false);
  const bool speculative = spf.requested();
  if (speculative && gen_prompt.empty()) return fail("bench", "the prompt of the gen tests is empty");

  int32_t max_streams = *std::max_element(streams.begin(), streams.end());
  ContextOptions co = mf.context;
  const int64_t gen_cells = speculative ? static_cast<int64_t>(gen_prompt.size()) + n_gen + 2 : 0;
  if (co.n_ctx == 0) co.n_ctx = std::max<int64_t>({n_prompt, n_gen * max_streams, gen_cells, 16});
  auto mc = mf.create_context("bench", model, co);
  if (!mc) return 1;
  Context& ctx = *mc->context;
  if (const int64_t need = std::max({n_prompt, n_gen * max_streams, gen_cells}); need > ctx.n_ctx()) {
    return fail("bench", "the tests need " + std::to_string(need) + " cells, the context has " +
                             std::to_string(ctx.n_ctx()) + " (raise -c)");
  }
  co.n_ctx = ctx.n_ctx();
  bool spec_failed = false;
  const auto speculator = spf.make(*model, mc->backend(), co, "bench", &spec_failed);
  if (spec_failed) return 1;
  std::unique_ptr<VisionEncoder> encoder;
  std::shared_ptr<const PreparedImage> image;
  if (*vision) {
    auto enc = VisionEncoder::create(*vision, mc->backend(),
                                     {.flash_attention = co.flash_attention,
                                      .arena = &mc->arena->arena(),
                                      .cache_images = 0});
    if (!enc.ok()) {
      std::fprintf(stderr, "kiln bench: %s\n", enc.error().message.c_str());
      return 1;
    }
    auto img = read_image(**vision, media.images[0]);
    if (!img.ok()) {
      std::fprintf(stderr, "kiln bench: --image: %s\n", img.error().message.c_str());
      return 1;
    }
    encoder = std::move(*enc);
    image = *img;
  }

  std::vector<BenchTest> tests;
  if (image)
    tests.push_back({"img " + std::to_string(image->pixels.width) + "x" + std::to_string(image->pixels.height),
                     image->n_tokens, TestKind::Image, 0, {}});
  if (n_prompt > 0) tests.push_back({"pp" + std::to_string(n_prompt), n_prompt, TestKind::Prompt, 0, {}});
  if (n_gen > 0) {
    for (int32_t s : streams)
      tests.push_back({"tg" + std::to_string(n_gen) + (s > 1 ? " x" + std::to_string(s) : ""),
                       n_gen * s,
                       TestKind::Generation,
                       s,
                       {}});
    if (speculator) {
      tests.push_back({"gen" + std::to_string(n_gen), n_gen, TestKind::Greedy, 1, {}});
      tests.push_back({"gen" + std::to_string(n_gen) + " spec", n_gen, TestKind::GreedySpeculative, 1, {}});
    }
  }

  std::mt19937 rng(1234);
  std::vector<int32_t> plain_tokens, spec_tokens;
  int64_t drafted = 0, accepted = 0;
  auto run_once = [&](const BenchTest& t) -> Result<double> {
    if (t.kind == TestKind::Greedy || t.kind == TestKind::GreedySpeculative) {
      const bool spec = t.kind == TestKind::GreedySpeculative;
      KILN_ASSIGN_OR_RETURN(
          GreedyRun run, run_greedy(ctx, spec ? speculator.get() : nullptr, gen_prompt, n_gen, co.n_batch));
      (spec ? spec_tokens : plain_tokens) = std::move(run.tokens);
      if (spec) {
        drafted += run.drafted;
        accepted += run.accepted;
      }
      return run.seconds;
    }
    ctx.clear();
    const auto t0 = Clock::now();
    if (t.kind == TestKind::Image)
      KILN_TRY(encoder->encode(*image));
    else if (t.kind == TestKind::Prompt)
      KILN_TRY(run_pp(ctx, rng, n_prompt, static_cast<size_t>(co.n_batch)));
    else
      KILN_TRY(run_tg(ctx, rng, n_gen, t.n_streams));
    return std::chrono::duration<double>(Clock::now() - t0).count();
  };
  // Warm-up: pages the weights in and touches the compute arena.
  {
    ctx.clear();
    Status st = run_tg(ctx, rng, 2, max_streams);
    if (encoder && st.ok()) {
      if (auto e = encoder->encode(*image); !e.ok()) st = e.error();
    }
    if (!st.ok()) return fail("bench", st.error().message);
  }
  for (int32_t r = 0; r < rounds; ++r) {
    for (BenchTest& t : tests) {
      auto s = run_once(t);
      if (!s.ok()) return fail("bench", t.name + ": " + s.error().message);
      t.seconds.push_back(*s);
    }
    if (speculator && spec_tokens != plain_tokens)
      return fail("bench", "speculative decoding changed the output (a bug: please report it)");
    std::fprintf(stderr, "kiln bench: round %d/%d done\n", r + 1, rounds);
  }

  std::printf("model: %s, device %s, %lld threads, %d rounds (interleaved), n_batch %lld, n_ubatch %lld\n\n",
              model->name().c_str(), mc->weights->device().name().c_str(),
              static_cast<long long>(mc->devices->pool().n_threads()), rounds,
              static_cast<long long>(co.n_batch), static_cast<long long>(co.n_ubatch));
  std::printf("| test | t/s (median) | t/s (min .. max) | ratio (median) |\n|---|---:|---:|---:|\n");
  auto tokens_per_second = [](const BenchTest& t, size_t r) { return static_cast<double>(t.n_tokens) / t.seconds[r]; };
  // Each ratio is to the test's baseline in the same round: both ran back to back under the same
  // machine load. Batched tg tests compare with tg x1, gen spec with gen.
  auto baseline = [&](const BenchTest& t) -> const BenchTest* {
    const TestKind kind = t.kind == TestKind::GreedySpeculative ? TestKind::Greedy : TestKind::Generation;
    if (t.kind != TestKind::GreedySpeculative && !(t.kind == TestKind::Generation && t.n_streams > 1))
      return nullptr;
    const auto it = std::find_if(tests.begin(), tests.end(),
                                 [&](const BenchTest& b) { return b.kind == kind && b.n_streams == 1; });
    return it == tests.end() ? nullptr : &*it;
  };
  for (const BenchTest& t : tests) {
    std::vector<double> tps, ratios;
    const BenchTest* base = baseline(t);
    for (size_t r = 0; r < t.seconds.size(); ++r) {
      tps.push_back(tokens_per_second(t, r));
      if (base != nullptr) ratios.push_back(tps.back() / tokens_per_second(*base, r));
    }
    std::string ratio;
    if (t.kind == TestKind::Image) {
      char buf[32];
      std::snprintf(buf, sizeof buf, "%.1f ms per image", median(t.seconds) * 1e3);
      ratio = buf;
    } else if (!ratios.empty()) {
      char buf[48];
      std::snprintf(buf, sizeof buf, "%.2fx vs %s", median(ratios), base->name.c_str());
      ratio = buf;
    }
    std::printf("| %s | %.2f | %.2f .. %.2f | %s |\n", t.name.c_str(), median(tps),
                *std::min_element(tps.begin(), tps.end()), *std::max_element(tps.begin(), tps.end()), ratio.c_str());
  }
  if (speculator) {
    std::printf(
        "\nspeculative: drafted %lld, accepted %lld per run (%.1f%%); output identical to gen%lld: yes\n",
        static_cast<long long>(drafted / rounds), static_cast<long long>(accepted / rounds),
        drafted > 0 ? 100.0 * static_cast<double>(accepted) / static_cast<double>(drafted) : 0.0,
        static_cast<long long>(n_gen));
  }
  return 0;
}

}  // namespace

KILN_COMMAND(bench, "speed of prompt processing and (batched) generation, as llama-bench", run_bench);

}  // namespace kiln::cli
