// `kiln bench`: prompt processing and generation speed of a model, as llama-bench measures them,
// plus batched generation with several streams (what `kiln serve` does with concurrent clients).
//   kiln bench [-m MODEL.gguf] [-p 512,...] [-n 128,...] [-pg P,N ...] [--streams 1,8] [-r 5]
//              [-o md|csv|json|jsonl] [model flags] [--mmproj MMPROJ.gguf --image IMG]
// Tests, each on an emptied KV cache, with random token ids (fixed seed):
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
//   llama-speculative-simple does).
// Rounds interleave the tests (pp, tg x1, tg xS, pp, ...) so that a noisy machine slows them alike;
// the table gives each test's median and range over the rounds, and for each batched test the
// median over rounds of its ratio to the single stream of the same round. -o csv, json and jsonl
// print one record per test with llama-bench's field names instead (standard output holds only
// them).
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

enum class TestKind { Prompt, Generation, PromptGeneration, Greedy, GreedySpeculative, Image };

struct BenchTest {
  std::string name;
  int64_t n_tokens;  // tokens per run (for tokens/s)
  TestKind kind;
  int32_t n_streams;  // Generation: streams
  int64_t n_prompt = 0, n_gen = 0;
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

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// A comma list of integers in `range` ("512,1024").
std::string parse_list(const std::string& v, const IntRange& range, std::vector<int64_t>* out) {
  out->clear();
  std::stringstream ss(v);
  std::string item;
  while (std::getline(ss, item, ',')) {
    int64_t x = 0;
    if (std::string err = parse_integer(item, range, &x); !err.empty()) return err;
    out->push_back(x);
  }
  if (out->empty()) return "give at least one value";
  return "";
}

// -o: the output format.
enum class Output { Markdown, Csv, Json, JsonLines };

std::string json_escape(const std::string& v) {
  std::string out;
  for (const char c : v) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      out += buf;
    } else {
      out += c;
    }
  }
  return out;
}

// One test's record with llama-bench's field names (n_streams is kiln's own). Values are JSON
// literals: strings quoted, arrays in brackets.
std::vector<std::pair<std::string, std::string>> record_of(
    const BenchTest& t, const std::vector<std::pair<std::string, std::string>>& common) {
  std::vector<std::pair<std::string, std::string>> r = common;
  std::vector<double> ns, ts;
  for (double s : t.seconds) {
    ns.push_back(s * 1e9);
    ts.push_back(static_cast<double>(t.n_tokens) / s);
  }
  auto mean = [](const std::vector<double>& v) {
    double sum = 0;
    for (double x : v) sum += x;
    return v.empty() ? 0.0 : sum / static_cast<double>(v.size());
  };
  auto stddev = [&](const std::vector<double>& v) {  // sample standard deviation, as llama-bench
    if (v.size() < 2) return 0.0;
    const double m = mean(v);
    double sq = 0;
    for (double x : v) sq += (x - m) * (x - m);
    return std::sqrt(sq / static_cast<double>(v.size() - 1));
  };
  auto list = [](const std::vector<double>& v, const char* fmt) {
    std::string out = "[";
    for (size_t i = 0; i < v.size(); ++i) {
      char buf[32];
      std::snprintf(buf, sizeof buf, fmt, v[i]);
      out += (i ? ", " : "") + std::string(buf);
    }
    return out + "]";
  };
  auto num = [](double v, const char* fmt) {
    char buf[32];
    std::snprintf(buf, sizeof buf, fmt, v);
    return std::string(buf);
  };
  r.emplace_back("n_prompt", std::to_string(t.n_prompt));
  r.emplace_back("n_gen", std::to_string(t.n_gen));
  r.emplace_back("n_depth", "0");
  r.emplace_back("n_streams", std::to_string(std::max(1, t.n_streams)));
  r.emplace_back("avg_ns", num(mean(ns), "%.0f"));
  r.emplace_back("stddev_ns", num(stddev(ns), "%.0f"));
  r.emplace_back("avg_ts", num(mean(ts), "%.6f"));
  r.emplace_back("stddev_ts", num(stddev(ts), "%.6f"));
  r.emplace_back("samples_ns", list(ns, "%.0f"));
  r.emplace_back("samples_ts", list(ts, "%.6f"));
  return r;
}

void print_records(Output out, const std::vector<std::vector<std::pair<std::string, std::string>>>& records) {
  if (out == Output::Csv) {
    for (size_t i = 0; i < records[0].size(); ++i)
      std::printf("%s%s", i ? "," : "", records[0][i].first.c_str());
    std::printf("\n");
    for (const auto& rec : records) {
      for (size_t i = 0; i < rec.size(); ++i) {
        std::string v = rec[i].second;
        if (!v.empty() && (v[0] == '[' || v[0] == '"')) {  // quoted CSV field, inner quotes doubled
          if (v[0] == '"') v = v.substr(1, v.size() - 2);
          std::string q = "\"";
          for (char c : v) q += c == '"' ? std::string("\"\"") : std::string(1, c);
          v = q + "\"";
        }
        std::printf("%s%s", i ? "," : "", v.c_str());
      }
      std::printf("\n");
    }
    return;
  }
  const bool lines = out == Output::JsonLines;
  if (!lines) std::printf("[\n");
  for (size_t r = 0; r < records.size(); ++r) {
    std::string obj = "{";
    for (size_t i = 0; i < records[r].size(); ++i)
      obj += (i ? ", " : "") + std::string("\"") + records[r][i].first + "\": " + records[r][i].second;
    obj += "}";
    if (lines)
      std::printf("%s\n", obj.c_str());
    else
      std::printf("  %s%s\n", obj.c_str(), r + 1 == records.size() ? "" : ",");
  }
  if (!lines) std::printf("]\n");
}

std::string parse_streams(const std::string& v, std::vector<int32_t>* out) {
  std::vector<int64_t> counts;
  if (std::string err = parse_list(v, IntRange::between(1, kMaxSequences), &counts); !err.empty())
    return err + " (stream counts)";
  out->clear();
  for (int64_t c : counts) out->push_back(static_cast<int32_t>(c));
  return "";
}

int run_bench(int argc, char** argv) {
  ModelFlags mf;
  SpeculativeFlags spf;
  MediaFlags media;
  mf.ctx_default = "what the tests need";
  std::vector<int64_t> prompts = {512}, gens = {128};
  std::vector<std::pair<int64_t, int64_t>> prompt_gens;  // -pg
  Output output = Output::Markdown;
  int32_t rounds = 5;
  std::vector<int32_t> streams = {1};
  std::string prompt_file;
  OptionParser p("bench", "kiln bench [-m MODEL.gguf] [-p N] [-n N] [--streams 1,8] [-r N] [options]");
  mf.declare(p);
  p.description(
      "Measures prompt processing (pp) and generation (tg) speed as llama-bench does, plus batched\n"
      "generation with several streams (tg xS), in interleaved rounds; prints medians and ranges.");
  p.custom(
      {"-p", "--n-prompt"},
      [&](const std::string& v) { return parse_list(v, IntRange::at_least(0), &prompts); }, "N1,N2,...",
      "prompt tokens of the pp tests (default 512; 0: no pp test)");
  p.custom(
      {"-n", "--n-gen"}, [&](const std::string& v) { return parse_list(v, IntRange::at_least(0), &gens); },
      "N1,N2,...", "generated tokens per stream of the tg tests (default 128; 0: none)");
  p.custom(
      {"-pg"},
      [&](const std::string& v) {
        std::vector<int64_t> pair;
        if (std::string err = parse_list(v, IntRange::at_least(1), &pair); !err.empty()) return err;
        if (pair.size() != 2) return std::string("give P,N (prompt and generated tokens)");
        prompt_gens.emplace_back(pair[0], pair[1]);
        return std::string();
      },
      "P,N", "a pp P+tg N test: P prompt tokens then N generated in the same sequence (repeatable)");
  p.custom(
      {"-o", "--output"},
      [&](const std::string& v) {
        if (v == "md")
          output = Output::Markdown;
        else if (v == "csv")
          output = Output::Csv;
        else if (v == "json")
          output = Output::Json;
        else if (v == "jsonl")
          output = Output::JsonLines;
        else
          return "'" + v + "' is not one of md, csv, json, jsonl";
        return std::string();
      },
      "md|csv|json|jsonl", "output format (default md: a table; the others: llama-bench's fields)");
  p.custom(
      {"--streams"}, [&](const std::string& v) { return parse_streams(v, &streams); }, "S1,S2,...",
      "stream counts of the tg tests (default 1)");
  p.value({"-r", "--repetitions"}, &rounds, "N", "rounds (default 5)", IntRange::at_least(1));
  p.value({"-f", "--file"}, &prompt_file, "FILE",
          "prompt of the gen tests run with speculative decoding flags (default: a fixed sentence)");
  spf.declare(p);
  media.declare(p);
  if (auto code = p.parse(argc, argv)) return *code;
  if (auto code = mf.list_devices_if_asked("bench")) return *code;
  if (spf.requested() && gens.size() > 1)
    return fail("bench", "speculative decoding flags take one -n value", 2);
  std::erase(prompts, 0);
  std::erase(gens, 0);
  if (prompts.empty() && gens.empty() && prompt_gens.empty() && media.images.empty())
    return fail("bench", "nothing to run (-p 0 and -n 0, no -pg, no --image)", 2);
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
  const int64_t n_prompt = prompts.empty() ? 0 : *std::max_element(prompts.begin(), prompts.end());
  const int64_t n_gen = gens.empty() ? 0 : *std::max_element(gens.begin(), gens.end());
  int64_t pg_cells = 0;
  for (const auto& [pp, tg] : prompt_gens) pg_cells = std::max(pg_cells, pp + tg);
  const int64_t gen_cells = speculative ? static_cast<int64_t>(gen_prompt.size()) + n_gen + 2 : 0;
  if (co.n_ctx == 0) co.n_ctx = std::max<int64_t>({n_prompt, n_gen * max_streams, gen_cells, pg_cells, 16});
  auto mc = mf.create_context("bench", model, co);
  if (!mc) return 1;
  Context& ctx = *mc->context;
  if (const int64_t need = std::max({n_prompt, n_gen * max_streams, gen_cells, pg_cells});
      need > ctx.n_ctx()) {
    return fail("bench", "the tests need " + std::to_string(need) + " cells, the context has " +
                             std::to_string(ctx.n_ctx()) + " (raise -c)");
  }
  co.n_ctx = ctx.n_ctx();
  co.arena = &mc->arena();  // the draft model computes in the device's arena too
  bool spec_failed = false;
  const auto speculator = spf.make(*model, mc->backend(), co, "bench", &spec_failed);
  if (spec_failed) return 1;
  std::unique_ptr<VisionEncoder> encoder;
  std::shared_ptr<const PreparedImage> image;
  if (*vision) {
    auto enc = VisionEncoder::create(*vision, mc->backend(),
                                     {.flash_attention = co.flash_attention,
                                      .arena = &mc->arena(),
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
                     image->n_tokens, TestKind::Image, 0, 0, 0, {}});
  for (int64_t pp : prompts) tests.push_back({"pp" + std::to_string(pp), pp, TestKind::Prompt, 0, pp, 0, {}});
  for (int64_t tg : gens) {
    for (int32_t s : streams)
      tests.push_back({"tg" + std::to_string(tg) + (s > 1 ? " x" + std::to_string(s) : ""),
                       tg * s,
                       TestKind::Generation,
                       s,
                       0,
                       tg,
                       {}});
    if (speculator) {
      tests.push_back({"gen" + std::to_string(tg), tg, TestKind::Greedy, 1, 0, tg, {}});
      tests.push_back({"gen" + std::to_string(tg) + " spec", tg, TestKind::GreedySpeculative, 1, 0, tg, {}});
    }
  }
  for (const auto& [pp, tg] : prompt_gens)
    tests.push_back({"pp" + std::to_string(pp) + "+tg" + std::to_string(tg),
                     pp + tg,
                     TestKind::PromptGeneration,
                     1,
                     pp,
                     tg,
                     {}});

  std::mt19937 rng(1234);
  std::vector<int32_t> plain_tokens, spec_tokens;
  int64_t drafted = 0, accepted = 0;
  auto run_once = [&](const BenchTest& t) -> Result<double> {
    if (t.kind == TestKind::Greedy || t.kind == TestKind::GreedySpeculative) {
      const bool spec = t.kind == TestKind::GreedySpeculative;
      KILN_ASSIGN_OR_RETURN(
          GreedyRun run, run_greedy(ctx, spec ? speculator.get() : nullptr, gen_prompt, t.n_gen, co.n_batch));
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
    else if (t.kind == TestKind::Prompt || t.kind == TestKind::PromptGeneration)
      KILN_TRY(run_pp(ctx, rng, t.n_prompt, static_cast<size_t>(co.n_batch)));
    if (t.kind == TestKind::Generation || t.kind == TestKind::PromptGeneration)
      KILN_TRY(run_tg(ctx, rng, t.n_gen, t.n_streams, t.n_prompt));
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

  if (output != Output::Markdown) {
    int64_t n_params = 0;
    for (const GgufTensorInfo& info : model->file().tensors()) n_params += info.nelements();
    const std::string path = model->path();
    const std::vector<std::pair<std::string, std::string>> common = {
        {"model_filename", "\"" + json_escape(path) + "\""},
        {"model_type", "\"" + json_escape(model->hparams().arch_key) + "\""},
        {"model_size", std::to_string(model->weight_bytes())},
        {"model_n_params", std::to_string(n_params)},
        {"n_batch", std::to_string(co.n_batch)},
        {"n_ubatch", std::to_string(co.n_ubatch)},
        {"n_threads", std::to_string(mc->devices->pool().n_threads())},
        {"type_k", "\"" + std::string(dtype_name(co.type_k)) + "\""},
        {"type_v", "\"" + std::string(dtype_name(co.type_v)) + "\""},
    };
    std::vector<std::vector<std::pair<std::string, std::string>>> records;
    for (const BenchTest& t : tests)
      if (t.kind != TestKind::Image) records.push_back(record_of(t, common));
    if (!records.empty()) print_records(output, records);
    return 0;
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
        static_cast<long long>(gens.front()));
  }
  return 0;
}

}  // namespace

KILN_COMMAND(bench, "speed of prompt processing and (batched) generation, as llama-bench", run_bench);

}  // namespace kiln::cli
