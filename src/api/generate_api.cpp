// kiln.h: kiln_generate, `kiln run`'s loop (llm/generation.h) with the caller's token callback;
// the prompt (with its images) decoded as `kiln run` decodes it (llm/media_prompt.h).
#include "api/handles.h"
#include "llm/generation.h"
#include "llm/reverse_prompts.h"

using namespace kiln;
using namespace kiln::api;

namespace {

kiln_stop_reason stop_reason(StopReason r) {
  switch (r) {
    case StopReason::EndOfGeneration:
      return KILN_STOP_END_OF_GENERATION;
    case StopReason::Length:
      return KILN_STOP_LENGTH;
    case StopReason::ReversePrompt:
      return KILN_STOP_STOP_TEXT;
    case StopReason::ContextFull:
      return KILN_STOP_CONTEXT_FULL;
    case StopReason::Interrupted:
    case StopReason::Stopped:
      return KILN_STOP_CALLBACK;
  }
  return KILN_STOP_CALLBACK;
}

}  // namespace

extern "C" {

kiln_status kiln_generate_default_options(kiln_generate_options* options) {
  KILN_API_TRY(check_pointer("kiln_generate_default_options", "options", options));
  *options = kiln_generate_options{.max_tokens = -1,
                                   .seq = 0,
                                   .parse_special = 0,
                                   .stop = nullptr,
                                   .n_stop = 0,
                                   .media = nullptr,
                                   .n_media = 0};
  return KILN_OK;
}

kiln_status kiln_generate(kiln_context* context, kiln_sampler* sampler, const char* prompt,
                          const kiln_generate_options* options, kiln_token_callback callback, void* user_data,
                          kiln_generate_result* result) {
  constexpr std::string_view fn = "kiln_generate";
  KILN_API_TRY(check_handle(fn, "context", context));
  KILN_API_TRY(check_handle(fn, "sampler", sampler));
  KILN_API_TRY(check_pointer(fn, "prompt", prompt));
  kiln_generate_options o{};
  KILN_API_TRY(kiln_generate_default_options(&o));
  if (options != nullptr) o = *options;
  KILN_API_TRY(check_sequence(fn, "seq", o.seq));
  KILN_API_TRY(check_size(fn, "n_stop", o.n_stop));
  if (o.n_stop > 0) KILN_API_TRY(check_pointer(fn, "stop", o.stop));
  if (o.max_tokens < -1)
    return bad_argument(fn, "max_tokens is below -1 (" + std::to_string(o.max_tokens) + ")");
  if (context->model->model != sampler->model->model)
    return bad_argument(fn, "the sampler and the context are of different models");
  return api_call(fn, [&] {
    Arbiter::Use turn;  // the device token, with an arbiter (api/arbiter_api.cpp)
    KILN_API_TRY(take_turn(fn, *context->model->runtime, &turn));
    Context& ctx = *context->context;
    const text::Tokenizer& tok = ctx.model().tokenizer();
    std::vector<std::string> stops;
    for (int64_t i = 0; i < o.n_stop; ++i) {
      if (o.stop[i] == nullptr) return bad_argument(fn, "stop[" + std::to_string(i) + "] is NULL");
      stops.emplace_back(o.stop[i]);
    }
    MediaPrompt mp;
    KILN_API_TRY(media_prompt(fn, *context, prompt, o.media, o.n_media, o.parse_special != 0, &mp));
    auto last = decode_prompt(*context, mp, o.seq);
    if (!last.ok()) return from_status(fn, last.error());
    SequenceState cached{.seq = o.seq, .tokens = mp.flat_tokens()};  // kMediaToken at image positions
    Sampler& s = sampler->sampler;
    for (int32_t t : cached.tokens)
      if (t != kMediaToken) s.accept_prompt(t);
    const ReversePrompts stop_texts(tok, std::move(stops), /*slack=*/2);  // as `kiln run -r`
    auto gen = generate(
        ctx, s, ctx.logits(*last), cached, {.n_predict = o.max_tokens, .reverse_prompts = &stop_texts},
        [&](int32_t token, std::string_view piece) {
          return callback == nullptr ||
                 callback(user_data, token, piece.data(), static_cast<int64_t>(piece.size())) == 0;
        });
    if (!gen.ok()) return from_status(fn, gen.error());
    if (result != nullptr) {
      *result = kiln_generate_result{
          .n_prompt = mp.n_positions(), .n_generated = gen->n_generated, .stop = stop_reason(gen->stop)};
    }
    return KILN_OK;
  });
}

}  // extern "C"
