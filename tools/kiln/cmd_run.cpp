// `kiln run`: plain text completion, streamed to stdout, with llama.cpp's flag names.
//   kiln run [-m MODEL.gguf] -p PROMPT [-n N] [--temp T] [--top-k K] [--top-p P] [--min-p P] ...
//            [--spec-type TYPES] [-md DRAFT.gguf] ...   (speculative decoding: same output, faster)
#include <algorithm>
#include <cstdio>

#include "command.h"
#include "generation.h"
#include "llm/sampler.h"
#include "model_flags.h"
#include "sampler_flags.h"
#include "speculative_flags.h"
#include "text_file.h"

namespace kiln::cli {
namespace {

int run_run(int argc, char** argv) {
  ModelFlags mf;
  SamplerFlags sf;
  SpeculativeFlags spf;
  std::string prompt, prompt_file;
  int64_t n_predict = -1, n_keep = 0;
  bool no_display_prompt = false, parse_special = false, context_shift = false, show_special = false;
  OptionParser p("run", "kiln run [-m MODEL.gguf] (-p PROMPT | -f FILE) [-n N] [options]");
  mf.declare(p);
  p.value({"-p", "--prompt"}, &prompt, "TEXT", "the prompt to continue");
  p.value({"-f", "--file"}, &prompt_file, "FILE", "read the prompt from FILE");
  p.value({"-n", "--n-predict"}, &n_predict, "N",
          "tokens to generate (-1, default: until end of text or context full)");
  p.flag({"--no-display-prompt"}, &no_display_prompt, "do not print the prompt before the continuation");
  p.flag({"--parse-special"}, &parse_special,
         "turn control tokens written in the prompt (e.g. <|im_start|>) into their ids");
  p.flag({"-sp", "--special"}, &show_special, "print control tokens of the output");
  p.flag({"--context-shift"}, &context_shift,
         "when the context is full, drop the older half of the text (after --keep) and go on");
  p.value({"--keep"}, &n_keep, "N", "prompt tokens kept by a context shift (default 0)");
  sf.declare(p);
  spf.declare(p);
  if (auto code = p.parse(argc, argv)) return *code;
  if (auto code = mf.list_devices_if_asked("run")) return *code;
  if (!read_file_option(prompt_file, "run", &prompt)) return 1;
  auto model = mf.load_model("run");
  if (!model) return 1;
  const auto& tok = model->tokenizer();
  auto sampler = sf.make_sampler(*model, "run");
  if (!sampler) return 1;

  auto mc = mf.create_context("run", model, mf.context);
  if (!mc) return 1;
  Context& ctx = *mc->context;
  const int64_t n_ctx = ctx.n_ctx();
  ContextOptions target_options = mf.context;
  target_options.n_ctx = n_ctx;
  bool spec_failed = false;
  const auto speculator = spf.make(*model, mc->backend(), target_options, "run", &spec_failed);
  if (spec_failed) return 1;
  std::vector<int32_t> tokens = tok.tokenize(prompt, true, parse_special);
  if (tokens.empty()) {
    std::fprintf(stderr, "kiln run: the prompt is empty (give one with -p or -f)\n");
    return 1;
  }
  if (static_cast<int64_t>(tokens.size()) >= n_ctx) {
    std::fprintf(stderr,
                 "kiln run: the prompt has %zu tokens, more than the context of %lld allows (raise -c)\n",
                 tokens.size(), static_cast<long long>(n_ctx));
    return 1;
  }
  n_keep = std::clamp<int64_t>(n_keep, 0, static_cast<int64_t>(tokens.size()));
  if (!no_display_prompt) {
    std::fwrite(prompt.data(), 1, prompt.size(), stdout);
    std::fflush(stdout);
  }

  // Prompt, in batches of n_batch tokens; logits only for the last token.
  const auto t_prompt = Clock::now();
  SequenceState cached;
  auto last = decode_tokens(ctx, tokens, cached, mf.context.n_batch);
  if (!last.ok()) {
    std::fprintf(stderr, "\nkiln run: %s\n", last.error().message.c_str());
    return 1;
  }
  for (int32_t t : tokens) sampler->accept(t);
  const auto drafter = speculator ? speculator->drafter(cached.seq) : nullptr;
  if (drafter) {
    if (const Status st = drafter->begin(cached.tokens); !st.ok()) {
      std::fprintf(stderr, "\nkiln run: draft model: %s\n", st.error().message.c_str());
      return 1;
    }
  }
  const double prompt_s = seconds_since(t_prompt);

  const auto t_gen = Clock::now();
  Utf8Stream out(stdout);
  auto gen = generate(ctx, *sampler, ctx.logits(*last), cached,
                      {.n_predict = n_predict,
                       .show_special = show_special,
                       .context_shift = context_shift,
                       .n_keep = n_keep,
                       .drafter = drafter.get()},
                      out);
  if (!gen.ok()) {
    std::fprintf(stderr, "\nkiln run: %s\n", gen.error().message.c_str());
    return 1;
  }
  if (gen->stop == StopReason::ContextFull) {
    std::fprintf(stderr,
                 "\nkiln run: the context of %lld tokens is full (raise -c, or allow --context-shift)\n",
                 static_cast<long long>(n_ctx));
  }
  const int64_t n_generated = gen->n_generated;
  const double gen_s = seconds_since(t_gen);
  std::printf("\n");
  std::fprintf(
      stderr,
      "\nkiln run: prompt %zu tokens in %.2f s (%.1f t/s), generated %lld tokens in %.2f s (%.1f t/s)\n",
      tokens.size(), prompt_s, static_cast<double>(tokens.size()) / std::max(prompt_s, 1e-9),
      static_cast<long long>(n_generated), gen_s, static_cast<double>(n_generated) / std::max(gen_s, 1e-9));
  if (drafter) {
    std::fprintf(stderr, "kiln run: speculative: drafted %lld, accepted %lld\n",
                 static_cast<long long>(drafter->n_drafted()), static_cast<long long>(drafter->n_accepted()));
  }
  return 0;
}

}  // namespace

KILN_COMMAND(run, "continue a prompt with a model (plain completion)", run_run);

}  // namespace kiln::cli
