// `kiln bench`: prompt processing and generation speed of a model, as llama-bench measures them,
// plus batched generation with several streams (what `kiln serve` does with concurrent clients).
//   kiln bench [-m M1,M2] [-p 512,...] [-n 128,...] [-pg P,N ...] [-d 0,4096] [--streams 1,8] [-r 5]
//              [-t N,...] [-b N,...] [-ub N,...] [-ctk T,...] [-ctv T,...] [-fa on,off] [-mmp 1,0]
//              [--no-warmup] [-o md|csv|json|jsonl] [model flags] [--mmproj MMPROJ.gguf --image IMG]
// The swept flags take comma lists, and every combination is measured (bench_sweep.h: llama-bench's
// order of loops); each depth of -d is a group of tests of its own. Tests, with random token ids
// (fixed seed), each on a KV cache holding only the group's depth (D tokens of sequence 0, decoded
// once per group and shared by every stream through seq_cp; the tests' cells are removed after
// each run):
//   pp P    one sequence, P prompt tokens decoded in n_batch-sized calls, logits for the last only
//   tg N    one sequence, N tokens decoded one call each (a batch of 1)
//   tg N xS S sequences generating together: N calls, each a batch of S tokens (one per stream);
//           reported as aggregate tokens/s (S*N tokens / time)
//   pp P+tg N  (-pg P,N) pp P, then tg N in the same sequence; (P + N) tokens / the whole time
//   img WxH with --mmproj and --image: the image encoded (the encoder graph on the prepared image,
//           no embedding cache) in the compute arena the decoder shares; t/s are image tokens/s,
//           and the ratio column gives the median milliseconds per image
// With speculative decoding flags (--spec-type, -md, ...), two more:
//   gen N       N tokens generated greedily after a prompt (-f FILE, else a fixed sentence), one
//               decode per token (end-of-generation tokens banned, so every run makes N)
//   gen N spec  the same with speculation; its ratio to gen N, the tokens drafted and accepted,
//               and whether both made the same tokens (they must) are printed
//   Both time the generation only (the prompt and the draft model's prefill excluded, as
//   llama-speculative-simple does). Speculation and images run with one setting at depth 0.
// Within a group, rounds interleave the tests (pp, tg x1, tg xS, pp, ...) so that a noisy machine
// slows them alike; the table gives each test's median and range over the rounds, and for each
// batched test the median over rounds of its ratio to the single stream of the same round. A
// warm-up (two steps of every stream; --no-warmup: none) follows every new context.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <optional>
#include <random>

#include "bench_report.h"
#include "bench_sweep.h"
#include "command.h"
#include "llm/generation.h"
#include "media_flags.h"
#include "messages.h"
#include "model_description.h"
#include "model_flags.h"
#include "speculative_flags.h"
#include "user_files.h"

namespace kiln::cli {
namespace {

using Clock = std::chrono::steady_clock;

enum class TestKind { Prompt, Generation, PromptGeneration, Greedy, GreedySpeculative, Image };

struct BenchTest {
  TestKind kind;
  BenchRow row;
};

// The tests of one group, at `depth`, in llama-bench's order (pp, tg, pp+tg) with kiln's own
// (tg xS after each tg, gen and gen spec with a speculator, img first with an image).
std::vector<BenchTest> tests_at(int64_t depth, const std::vector<int64_t>& prompts,
                                const std::vector<int64_t>& gens, const std::vector<int32_t>& streams,
                                const std::vector<std::pair<int64_t, int64_t>>& prompt_gens, bool speculative,
                                const PreparedImage* image) {
  const std::string at = depth > 0 ? " @ d" + std::to_string(depth) : "";
  auto test = [&](TestKind kind, std::string name, int64_t pp, int64_t tg, int32_t n_streams) {
    return BenchTest{kind,
                     {.test = name + at,
                      .n_prompt = pp,
                      .n_gen = tg,
                      .n_depth = depth,
                      .n_streams = n_streams,
                      .n_tokens = pp + tg * n_streams,
                      .seconds = {},
                      .ratio = {},
                      .llama_bench_test = kind != TestKind::Greedy && kind != TestKind::GreedySpeculative}};
  };
  std::vector<BenchTest> tests;
  if (image != nullptr) {
    BenchTest img = test(
        TestKind::Image,
        "img " + std::to_string(image->pixels.width) + "x" + std::to_string(image->pixels.height), 0, 0, 1);
    img.row.n_tokens = image->n_tokens;
    img.row.llama_bench_test = false;
    tests.push_back(img);
  }
  for (int64_t pp : prompts) tests.push_back(test(TestKind::Prompt, "pp" + std::to_string(pp), pp, 0, 1));
  for (int64_t tg : gens) {
    for (int32_t s : streams)
      tests.push_back(test(TestKind::Generation,
                           "tg" + std::to_string(tg) + (s > 1 ? " x" + std::to_string(s) : ""), 0, tg, s));
    if (speculative) {
      tests.push_back(test(TestKind::Greedy, "gen" + std::to_string(tg), 0, tg, 1));
      tests.push_back(test(TestKind::GreedySpeculative, "gen" + std::to_string(tg) + " spec", 0, tg, 1));
    }
  }
  for (const auto& [pp, tg] : prompt_gens)
    tests.push_back(
        test(TestKind::PromptGeneration, "pp" + std::to_string(pp) + "+tg" + std::to_string(tg), pp, tg, 1));
  return tests;
}

// The md table's ratio column. Each ratio is to the test's baseline in the same round: both ran
// back to back under the same machine load. Batched tg tests compare with tg x1 (of the same
// length), gen spec with gen; an image gives its median milliseconds per image.
void set_ratios(std::vector<BenchTest>& tests) {
  auto baseline = [&](const BenchTest& t) -> const BenchTest* {
    if (t.kind != TestKind::GreedySpeculative && !(t.kind == TestKind::Generation && t.row.n_streams > 1))
      return nullptr;
    const TestKind kind = t.kind == TestKind::GreedySpeculative ? TestKind::Greedy : TestKind::Generation;
    const auto it = std::find_if(tests.begin(), tests.end(), [&](const BenchTest& b) {
      return b.kind == kind && b.row.n_streams == 1 && b.row.n_gen == t.row.n_gen;
    });
    return it == tests.end() ? nullptr : &*it;
  };
  for (BenchTest& t : tests) {
    char buf[64];
    if (t.kind == TestKind::Image) {
      std::snprintf(buf, sizeof buf, "%.1f ms per image", median(t.row.seconds) * 1e3);
      t.row.ratio = buf;
    } else if (const BenchTest* base = baseline(t)) {
      std::vector<double> ratios;  // tokens/s over the base's: (tokens / s) / (base tokens / base s)
      for (size_t r = 0; r < t.row.seconds.size(); ++r)
        ratios.push_back(static_cast<double>(t.row.n_tokens) / t.row.seconds[r] /
                         (static_cast<double>(base->row.n_tokens) / base->row.seconds[r]));
      std::snprintf(buf, sizeof buf, "%.2fx vs %s", median(ratios), base->row.test.c_str());
      t.row.ratio = buf;
    }
  }
}

// Prompt processing: n_prompt tokens of sequence 0 from position pos0.
Status run_pp(Context& ctx, std::mt19937& rng, int64_t n_prompt, size_t n_batch, int64_t pos0 = 0) {
  std::uniform_int_distribution<int32_t> token(0, static_cast<int32_t>(ctx.n_vocab() - 1));
  Batch batch;
  for (int64_t begin = 0; begin < n_prompt; begin += static_cast<int64_t>(n_batch)) {
    const int64_t end = std::min<int64_t>(n_prompt, begin + static_cast<int64_t>(n_batch));
    batch.clear();
    for (int64_t i = begin; i < end; ++i)
      batch.add(token(rng), static_cast<int32_t>(pos0 + i), 0, i + 1 == n_prompt);
    KILN_TRY(ctx.decode(batch));
  }
  return {};
}

// Generation: n_gen steps from position pos0, each one token for every one of n_streams sequences.
Status run_tg(Context& ctx, std::mt19937& rng, int64_t n_gen, int32_t n_streams, int64_t pos0 = 0) {
  std::uniform_int_distribution<int32_t> token(0, static_cast<int32_t>(ctx.n_vocab() - 1));
  Batch batch;
  for (int64_t step = 0; step < n_gen; ++step) {
    batch.clear();
    for (int32_t s = 0; s < n_streams; ++s) batch.add(token(rng), static_cast<int32_t>(pos0 + step), s, true);
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

std::string parse_streams(const std::string& v, std::vector<int32_t>* out) {
  std::vector<int64_t> counts;
  if (std::string err = parse_int_list(v, IntRange::between(1, kMaxSequences), &counts); !err.empty())
    return err + " (stream counts)";
  out->clear();
  for (int64_t c : counts) out->push_back(static_cast<int32_t>(c));
  return "";
}

int run_bench(int argc, char** argv) {
  ModelFlags mf;
  mf.swept = true;
  BenchSweep sweep;
  SpeculativeFlags spf;
  MediaFlags media;
  mf.ctx_default = "what the tests need";
  std::vector<int64_t> prompts = {512}, gens = {128};
  std::vector<std::pair<int64_t, int64_t>> prompt_gens;  // -pg
  BenchReport::Format format = BenchReport::Format::Markdown;
  int32_t rounds = 5;
  bool no_warmup = false;
  std::vector<int32_t> streams = {1};
  std::string prompt_file;
  OptionParser p(
      "bench",
      "kiln bench [-m MODEL.gguf,...] [-p N,...] [-n N,...] [-d N,...] [--streams 1,8] [-r N] [options]");
  sweep.declare(p);
  mf.declare(p);
  p.description(
      "Measures prompt processing (pp) and generation (tg) speed as llama-bench does, plus batched\n"
      "generation with several streams (tg xS), in interleaved rounds; prints medians and ranges.\n"
      "-m, -mmp, -b, -ub, -ctk, -ctv, -fa, -t and -d take comma lists: every combination is measured.");
  p.custom(
      {"-p", "--n-prompt"},
      [&](const std::string& v) { return parse_int_list(v, IntRange::at_least(0), &prompts); }, "N1,N2,...",
      "prompt tokens of the pp tests (default 512; 0: no pp test)");
  p.custom(
      {"-n", "--n-gen"},
      [&](const std::string& v) { return parse_int_list(v, IntRange::at_least(0), &gens); }, "N1,N2,...",
      "generated tokens per stream of the tg tests (default 128; 0: none)");
  p.custom(
      {"-pg"},
      [&](const std::string& v) {
        std::vector<int64_t> pair;
        if (std::string err = parse_int_list(v, IntRange::at_least(1), &pair); !err.empty()) return err;
        if (pair.size() != 2) return std::string("give P,N (prompt and generated tokens)");
        prompt_gens.emplace_back(pair[0], pair[1]);
        return std::string();
      },
      "P,N", "a pp P+tg N test: P prompt tokens then N generated in the same sequence (repeatable)");
  p.custom(
      {"-o", "--output"}, [&](const std::string& v) { return BenchReport::parse_format(v, &format); },
      "md|csv|json|jsonl", "output format (default md: a table; the others: llama-bench's fields)");
  p.custom(
      {"--streams"}, [&](const std::string& v) { return parse_streams(v, &streams); }, "S1,S2,...",
      "stream counts of the tg tests (default 1)");
  p.value({"-r", "--repetitions"}, &rounds, "N", "rounds (default 5)", IntRange::at_least(1));
  p.flag({"--no-warmup"}, &no_warmup, "no warm-up run before the tests of each new context");
  p.value({"-f", "--file"}, &prompt_file, "FILE",
          "prompt of the gen tests run with speculative decoding flags (default: a fixed sentence)");
  spf.declare(p);
  media.declare(p);
  if (auto code = p.parse(argc, argv)) return *code;
  if (auto code = mf.list_devices_if_asked("bench")) return *code;
  if (mf.no_mmap && !sweep.use_mmap.empty()) return fail("bench", "give -mmp or --no-mmap, not both", 2);
  const bool speculative = spf.requested();
  if (speculative && gens.size() > 1) return fail("bench", "speculative decoding flags take one -n value", 2);
  std::erase(prompts, 0);
  std::erase(gens, 0);
  if (prompts.empty() && gens.empty() && prompt_gens.empty() && media.images.empty())
    return fail("bench", "nothing to run (-p 0 and -n 0, no -pg, no --image)", 2);
  if (media.images.size() > 1) return fail("bench", "give one --image", 2);
  sweep.fill_defaults(mf.context, mf.no_mmap);
  const std::vector<BenchConfig> configs = sweep.configs();
  const bool extras = speculative || !media.mmproj.empty() || !media.images.empty();
  if (extras && (configs.size() > 1 || sweep.n_depth != std::vector<int64_t>{0}))
    return fail("bench",
                "speculative decoding and image tests run with one model and one value of each swept flag, "
                "at depth 0",
                2);

  const int32_t max_streams = *std::max_element(streams.begin(), streams.end());
  const int64_t max_depth = *std::max_element(sweep.n_depth.begin(), sweep.n_depth.end());
  const int64_t n_prompt = prompts.empty() ? 0 : *std::max_element(prompts.begin(), prompts.end());
  const int64_t n_gen = gens.empty() ? 0 : *std::max_element(gens.begin(), gens.end());
  int64_t pg_cells = 0;
  for (const auto& [pp, tg] : prompt_gens) pg_cells = std::max(pg_cells, pp + tg);
  std::string prompt_text = "The quick brown fox jumps over the lazy dog.";
  if (!read_file_option(prompt_file, "bench", &prompt_text)) return 1;

  BenchReport report(format, sweep.shown_fields(mf.context, mf.device != "cpu" || mf.split.devices.size() > 1));
  std::shared_ptr<const Model> model;
  std::optional<ModelContext> mc;
  const BenchConfig* previous = nullptr;
  std::unique_ptr<Speculator> speculator;  // (single setting) destroyed before mc: it plans in its arena
  std::unique_ptr<VisionEncoder> encoder;
  std::shared_ptr<const PreparedImage> image;
  std::vector<int32_t> gen_prompt;
  ContextOptions co;
  BenchSetting setting;
  std::mt19937 rng(1234);
  size_t group = 0;
  const size_t n_groups = configs.size() * sweep.n_depth.size();
  for (const BenchConfig& config : configs) {
    if (previous == nullptr || config.model != previous->model) {
      mc.reset();
      mf.model_path = config.model;
      model = mf.load_model("bench");
      if (!model) return 1;
      if (auto code = mf.fit_print_if_asked("bench", model)) return *code;
      gen_prompt = model->tokenizer().tokenize(prompt_text, true, false);
      if (speculative && gen_prompt.empty()) return fail("bench", "the prompt of the gen tests is empty");
      const int64_t gen_cells = speculative ? static_cast<int64_t>(gen_prompt.size()) + n_gen + 2 : 0;
      const int64_t need = max_depth + std::max({n_prompt, n_gen * max_streams, gen_cells, pg_cells});
      co = mf.context;
      if (co.n_ctx == 0) co.n_ctx = std::max<int64_t>(need, 16);
      if (const int64_t cells = context_size(co, model->hparams()); need > cells) {
        const std::string at_depth =
            max_depth > 0 ? "-d " + std::to_string(max_depth) + ": the tests at that depth need "
                          : "the tests need ";
        return fail("bench", at_depth + std::to_string(need) + " cells, the context has " +
                                 std::to_string(cells) + " (raise -c)");
      }
      int64_t n_params = 0;
      for (const GgufTensorInfo& info : model->file().tensors()) n_params += info.nelements();
      setting.model_filename = model->path();
      setting.model_type = model_description(*model);
      setting.model_size = static_cast<int64_t>(model->weight_bytes());
      setting.model_n_params = n_params;
    }
    co.n_batch = config.n_batch;
    co.n_ubatch = config.n_ubatch;
    co.type_k = config.type_k;
    co.type_v = config.type_v;
    co.flash_attention = config.flash_attn;
    if (!mc || !config.same_weights(*previous)) {
      mc.reset();
      mf.no_mmap = !config.use_mmap;
      mf.threads = config.n_threads;
      mf.split = config.placement(mf.split);
      mc = mf.create_context("bench", model, co);
      if (!mc) return 1;
    } else if (!mf.replace_context("bench", *mc, co)) {
      return 1;
    }
    previous = &config;
    Context& ctx = *mc->context;
    setting.backend = mc->weights->device().name();
    setting.n_threads = mc->devices->pool().n_threads();
    setting.config = config;
    if (extras) {  // one setting: made once, with its context
      ContextOptions spec_co = co;
      spec_co.n_ctx = ctx.n_ctx();
      bool spec_failed = false;
      speculator =
          spf.make(*model, mf, *mc, spec_co, "bench", &spec_failed);
      if (spec_failed) return 1;
      auto vision = media.load_vision(*model);
      if (!vision.ok()) return fail("bench", vision.error().message);
      if (*vision && media.images.empty()) return fail("bench", "--mmproj needs an --image to encode", 2);
      if (*vision) {
        auto enc = media.vision_encoder(*vision, *mc, co, mf.weight_options("bench"), /*cache_entries=*/0);
        if (!enc.ok()) return fail("bench", enc.error().message);
        auto img = read_image(**vision, media.images[0]);
        if (!img.ok()) return fail("bench", "--image: " + img.error().message);
        encoder = std::move(*enc);
        image = *img;
      }
    }

    // Warm-up: pages the weights in and touches the compute arena.
    if (!no_warmup) {
      ctx.clear();
      Status st = run_tg(ctx, rng, 2, max_streams);
      if (encoder && st.ok()) {
        if (auto e = encoder->encode(*image); !e.ok()) st = e.error();
      }
      if (!st.ok()) return fail("bench", st.error().message);
    }

    int64_t filled_depth = -1;  // the depth sequence 0 holds in the cache (-1: unknown)
    // The cache as a test at `depth` with `n_streams` starts: empty, or the depth's tokens in
    // sequence 0, shared with the other streams.
    auto prepare = [&](int64_t depth, int32_t n_streams) -> Status {
      if (depth == 0 || filled_depth != depth) {
        ctx.clear();
        filled_depth = 0;
        if (depth == 0) return {};
        KILN_TRY(run_pp(ctx, rng, depth, static_cast<size_t>(co.n_batch)));
        filled_depth = depth;
      }
      ctx.seq_rm(0, static_cast<int32_t>(depth), -1);
      for (int32_t s = 1; s < max_streams; ++s) ctx.seq_rm(s, 0, -1);
      for (int32_t s = 1; s < n_streams; ++s) ctx.seq_cp(0, s, 0, static_cast<int32_t>(depth));
      return {};
    };
    for (const int64_t depth : sweep.n_depth) {
      std::vector<BenchTest> tests =
          tests_at(depth, prompts, gens, streams, prompt_gens, speculator != nullptr, image.get());
      std::vector<int32_t> plain_tokens, spec_tokens;
      int64_t drafted = 0, accepted = 0;
      auto run_once = [&](const BenchTest& t) -> Result<double> {
        if (t.kind == TestKind::Greedy || t.kind == TestKind::GreedySpeculative) {
          const bool spec = t.kind == TestKind::GreedySpeculative;
          filled_depth = -1;
          KILN_ASSIGN_OR_RETURN(GreedyRun run, run_greedy(ctx, spec ? speculator.get() : nullptr, gen_prompt,
                                                          t.row.n_gen, co.n_batch));
          (spec ? spec_tokens : plain_tokens) = std::move(run.tokens);
          if (spec) {
            drafted += run.drafted;
            accepted += run.accepted;
          }
          return run.seconds;
        }
        KILN_TRY(prepare(depth, t.row.n_streams));
        const auto t0 = Clock::now();
        if (t.kind == TestKind::Image)
          KILN_TRY(encoder->encode(*image));
        else if (t.kind == TestKind::Prompt || t.kind == TestKind::PromptGeneration)
          KILN_TRY(run_pp(ctx, rng, t.row.n_prompt, static_cast<size_t>(co.n_batch), depth));
        if (t.kind == TestKind::Generation || t.kind == TestKind::PromptGeneration)
          KILN_TRY(run_tg(ctx, rng, t.row.n_gen, t.row.n_streams, depth + t.row.n_prompt));
        return std::chrono::duration<double>(Clock::now() - t0).count();
      };
      ++group;
      for (int32_t r = 0; r < rounds; ++r) {
        for (BenchTest& t : tests) {
          auto s = run_once(t);
          if (!s.ok()) return fail("bench", t.row.test + ": " + s.error().message);
          t.row.seconds.push_back(*s);
        }
        if (speculator && spec_tokens != plain_tokens)
          return fail("bench", "speculative decoding changed the output (a bug: please report it)");
        if (n_groups > 1)
          std::fprintf(stderr, "kiln bench: setting %zu/%zu: round %d/%d done\n", group, n_groups, r + 1,
                       rounds);
        else
          std::fprintf(stderr, "kiln bench: round %d/%d done\n", r + 1, rounds);
      }
      set_ratios(tests);
      for (const BenchTest& t : tests) report.add(setting, t.row);
      if (speculator && format == BenchReport::Format::Markdown) {
        std::printf(
            "\nspeculative: drafted %lld, accepted %lld per run (%.1f%%); output identical to gen%lld: yes\n",
            static_cast<long long>(drafted / rounds), static_cast<long long>(accepted / rounds),
            drafted > 0 ? 100.0 * static_cast<double>(accepted) / static_cast<double>(drafted) : 0.0,
            static_cast<long long>(gens.front()));
      }
    }
  }
  report.finish();
  return 0;
}

}  // namespace

KILN_COMMAND(bench, "speed of prompt processing and (batched) generation, as llama-bench", run_bench);

}  // namespace kiln::cli
