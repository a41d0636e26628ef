// `kiln run`: plain text completion, streamed to stdout, with llama.cpp's flag names.
//   kiln run [-m MODEL.gguf] -p PROMPT [-n N] [-r STOP] [--temp T] [--top-k K] [--top-p P] ...
//            [--spec-type TYPES] [-md DRAFT.gguf] ...   (speculative decoding: same output, faster)
//   kiln run -m MODEL.gguf --mmproj MMPROJ.gguf --image A.png [--image B.jpg] -p "...<__media__>..."
//   kiln run -m MODEL.gguf --mmproj MMPROJ.gguf --audio A.wav -p "...<__media__>..."
// With images or audio, the prompt is tokenized and decoded as llama-mtmd-cli does (llm/media_prompt.h).
#include <algorithm>
#include <cstdio>

#include "command.h"
#include "llm/generation.h"
#include "llm/media_prompt.h"
#include "llm/reverse_prompts.h"
#include "llm/sampler.h"
#include "media_flags.h"
#include "messages.h"
#include "model_flags.h"
#include "sampler_flags.h"
#include "speculative_flags.h"
#include "stopwatch.h"
#include "user_files.h"
#include "utf8_stream.h"

namespace kiln::cli {
namespace {

// " (N images, M of their tokens)", " (N audio chunks, M of their tokens)" (both when the prompt
// has both) for a prompt with media, else "".
std::string image_note(const MediaPrompt& p) {
  int64_t images = 0, image_tokens = 0, audio = 0, audio_tokens = 0;
  for (const PromptChunk& c : p.chunks) {
    if (c.image) ++images, image_tokens += c.n_positions();
    if (c.audio) ++audio, audio_tokens += c.n_positions();
  }
  std::string note;
  if (images > 0)
    note += " (" + std::to_string(images) + (images == 1 ? " image, " : " images, ") + std::to_string(image_tokens) +
            " of their tokens)";
  if (audio > 0)
    note += " (" + std::to_string(audio) + (audio == 1 ? " audio chunk, " : " audio chunks, ") +
            std::to_string(audio_tokens) + " of their tokens)";
  return note;
}

constexpr int64_t kUntilContextFull = -2;  // -n -2, as llama.cpp's completion tool

int run_run(int argc, char** argv) {
  ModelFlags mf;
  MediaFlags media;
  SamplerFlags sf;
  SpeculativeFlags spf;
  std::string prompt, prompt_file;
  std::vector<std::string> reverse_prompts;
  int64_t n_predict = -1, n_keep = 0;
  bool no_display_prompt = false, parse_special = false, context_shift = false, show_special = false;
  bool verbose = false;
  OptionParser p("run", "kiln run [-m MODEL.gguf] (-p PROMPT | -f FILE) [-n N] [options]");
  p.description(
      "Continues a prompt with a model (plain completion): the text streams to stdout, a timing\n"
      "line to stderr.");
  mf.declare(p);
  p.value({"-p", "--prompt"}, &prompt, "TEXT", "the prompt to continue");
  p.value({"-f", "--file"}, &prompt_file, "FILE", "read the prompt from FILE");
  p.value(
      {"-n", "--n-predict"}, &n_predict, "N",
      "tokens to generate (default -1: until end of text or context full; -2: until context full, no shift)",
      IntRange::at_least(kUntilContextFull));
  p.value({"-r", "--reverse-prompt"}, &reverse_prompts, "TEXT",
          "stop when the text ends with TEXT (repeatable)");
  p.flag({"--no-display-prompt"}, &no_display_prompt, "do not print the prompt before the continuation");
  p.flag({"--parse-special"}, &parse_special,
         "turn control tokens written in the prompt (e.g. <|im_start|>) into their ids");
  p.flag({"-sp", "--special"}, &show_special, "print control tokens of the output");
  p.flag({"--context-shift"}, &context_shift,
         "when the context is full, drop the older half of the text (after --keep) and go on");
  p.value({"--keep"}, &n_keep, "N", "prompt tokens kept by a context shift (default 0; -1: all)",
          IntRange::at_least(-1));
  media.declare(p, /*audio=*/true);
  p.flag({"-v", "--verbose"}, &verbose, "print the memory breakdown (per device and model) at exit");
  sf.declare(p);
  spf.declare(p);
  if (auto code = p.parse(argc, argv)) return *code;
  if (auto code = mf.list_devices_if_asked("run")) return *code;
  if (context_shift && media.any_media())
    return fail("run", "--context-shift is not supported with images or audio (as in llama.cpp)");
  if (spf.requested() && media.any_media())
    return fail("run", "speculative decoding is not supported with images or audio");
  if (!prompt.empty() && !prompt_file.empty())
    return fail("run", "give the prompt with -p or -f, not both", 2);
  if (n_predict == kUntilContextFull) {
    n_predict = -1;
    context_shift = false;
  }
  if (!read_file_option(prompt_file, "run", &prompt)) return 1;
  auto model = mf.load_model("run");
  if (!model) return 1;
  if (auto code = mf.fit_print_if_asked("run", model)) return *code;
  const auto& tok = model->tokenizer();
  auto sampler = sf.make_sampler(*model, "run");
  if (!sampler) return 1;

  auto vision = media.load_vision(*model);
  if (!vision.ok()) {
    std::fprintf(stderr, "kiln run: %s\n", vision.error().message.c_str());
    return 1;
  }
  auto audio_model = media.load_audio(*model);
  if (!audio_model.ok()) {
    std::fprintf(stderr, "kiln run: %s\n", audio_model.error().message.c_str());
    return 1;
  }
  mf.context.input_embeddings = *vision != nullptr || *audio_model != nullptr;
  // The decoder and the vision encoder take turns on the context's compute arena.
  auto mc = mf.create_context("run", model, mf.context);
  if (!mc) return 1;
  Context& ctx = *mc->context;
  const int64_t n_ctx = ctx.n_ctx();
  ContextOptions target_options = mf.context;
  target_options.n_ctx = n_ctx;
  bool spec_failed = false;
  const auto speculator =
      spf.make(*model, mf, *mc, target_options, "run", &spec_failed);
  if (spec_failed) return 1;
  std::unique_ptr<VisionEncoder> encoder;
  std::unique_ptr<AudioEncoder> audio_encoder;
  MediaPrompt media_prompt;
  if (*vision || *audio_model) {
    if (*vision) {
      auto enc = media.vision_encoder(*vision, *mc, mf.context, mf.weight_options("run"));
      if (!enc.ok()) {
        std::fprintf(stderr, "kiln run: %s\n", enc.error().message.c_str());
        return 1;
      }
      encoder = std::move(*enc);
    }
    if (*audio_model) {
      auto enc = media.audio_encoder(*audio_model, *mc, mf.context, mf.weight_options("run"));
      if (!enc.ok()) {
        std::fprintf(stderr, "kiln run: %s\n", enc.error().message.c_str());
        return 1;
      }
      audio_encoder = std::move(*enc);
    }
    auto items = media.read_media(vision->get(), audio_model->get());
    if (!items.ok()) {
      std::fprintf(stderr, "kiln run: %s\n", items.error().message.c_str());
      return 1;
    }
    auto mp = tokenize_media_prompt(tok, {.vision = vision->get(), .audio = audio_model->get()},
                                    with_media_markers(prompt, items->size()), *items,
                                    {.add_special = true, .parse_special = parse_special});
    if (!mp.ok()) {
      std::fprintf(stderr, "kiln run: %s\n", mp.error().message.c_str());
      return 1;
    }
    media_prompt = std::move(*mp);
  } else {
    media_prompt.append_text(tok.tokenize(prompt, true, parse_special));
  }
  const std::vector<int32_t> tokens = media_prompt.flat_tokens();  // kMediaToken at image positions
  if (tokens.empty()) return fail("run", "the prompt is empty (give one with -p or -f)");
  if (static_cast<int64_t>(tokens.size()) >= n_ctx) {
    return fail("run", "the prompt has " + std::to_string(tokens.size()) +
                           " tokens, more than the context of " + std::to_string(n_ctx) +
                           " allows (raise -c)");
  }
  const auto n_prompt = static_cast<int64_t>(tokens.size());
  n_keep = n_keep < 0 ? n_prompt : std::min(n_keep, n_prompt);
  const ReversePrompts stops(tok, reverse_prompts, /*slack=*/2);
  if (!no_display_prompt) {
    std::fwrite(prompt.data(), 1, prompt.size(), stdout);
    std::fflush(stdout);
  }

  // Prompt, in batches of n_batch tokens; logits only for the last token.
  const auto t_prompt = Clock::now();
  SequenceState cached;
  auto last = decode_media_prompt(ctx, encoder.get(), media_prompt, 0,
                                  {.seq = 0, .n_batch = mf.context.n_batch, .audio = audio_encoder.get()});
  if (!last.ok()) {
    std::fputc('\n', stderr);
    return fail("run", last.error().message);
  }
  cached.tokens = tokens;
  for (int32_t t : tokens) {
    if (t != kMediaToken) sampler->accept_prompt(t);
  }
  const auto drafter = speculator ? speculator->drafter(cached.seq) : nullptr;
  if (drafter) {
    if (const Status st = drafter->begin(cached.tokens); !st.ok()) {
      std::fputc('\n', stderr);
      return fail("run", "draft model: " + st.error().message);
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
                       .reverse_prompts = &stops,
                       .drafter = drafter.get()},
                      [&out](int32_t, std::string_view piece) {
                        out.write(piece);
                        return true;
                      });
  out.finish();
  if (!gen.ok()) {
    std::fputc('\n', stderr);
    return fail("run", gen.error().message);
  }
  if (sampler->grammar_stalled()) {
    std::fputc('\n', stderr);
    print_error("run", sampler->grammar_error());
  }
  if (gen->stop == StopReason::ContextFull) {
    std::fputc('\n', stderr);
    print_error("run", "the context of " + std::to_string(n_ctx) +
                           " tokens is full (raise -c, or allow --context-shift)");
  }
  const int64_t n_generated = gen->n_generated;
  const double gen_s = seconds_since(t_gen);
  std::printf("\n");
  std::fprintf(
      stderr,
      "\nkiln run: prompt %zu tokens%s in %.2f s (%.1f t/s), generated %lld tokens in %.2f s (%.1f t/s)\n",
      tokens.size(), image_note(media_prompt).c_str(), prompt_s, static_cast<double>(tokens.size()) / std::max(prompt_s, 1e-9),
      static_cast<long long>(n_generated), gen_s, static_cast<double>(n_generated) / std::max(gen_s, 1e-9));
  if (drafter) {
    std::fprintf(stderr, "kiln run: speculative: drafted %lld, accepted %lld\n",
                 static_cast<long long>(drafter->n_drafted()), static_cast<long long>(drafter->n_accepted()));
    drafter->finish(gen->tokens);
    if (const Status st = speculator->save_lookup_cache(); !st.ok()) return fail("run", st.error().message);
  }
  if (verbose) std::fputs(format_memory_breakdown(mc->devices->memory_breakdown()).c_str(), stderr);
  return 0;
}

}  // namespace

KILN_COMMAND(run, "continue a prompt with a model (plain completion)", run_run);

}  // namespace kiln::cli
