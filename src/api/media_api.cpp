// kiln.h: images and audio (kiln_mmproj_load/free, kiln_decode_media_prompt) over
// llm/vision_model.h, llm/audio_model.h and llm/media_prompt.h, as `kiln run --image/--audio`
// uses them.
#include "api/handles.h"

using namespace kiln;
using namespace kiln::api;

namespace kiln::api {

kiln_status media_prompt(std::string_view fn, const kiln_context& context, const char* text,
                         const kiln_media* media, int64_t n_media, bool parse_special, MediaPrompt* out) {
  KILN_API_TRY(check_size(fn, "n_media", n_media));
  if (n_media > 0) KILN_API_TRY(check_pointer(fn, "media", media));
  const Context& ctx = *context.context;
  const text::Tokenizer& tok = ctx.model().tokenizer();
  const kiln_mmproj* mmproj = context.mmproj;
  const MediaModels models = {.vision = mmproj ? mmproj->vision.get() : nullptr,
                              .audio = mmproj ? mmproj->audio.get() : nullptr};
  std::vector<MediaItem> items;
  for (int64_t i = 0; i < n_media; ++i) {
    const std::string which = "media[" + std::to_string(i) + "]";
    const kiln_media& m = media[i];
    KILN_API_TRY(check_size(fn, which + ".size", m.size));
    if (m.size > 0) KILN_API_TRY(check_pointer(fn, which + ".data", m.data));
    const std::span<const uint8_t> bytes(m.data, static_cast<size_t>(m.size));
    MediaItem item;
    if (m.type == KILN_MEDIA_IMAGE) {
      if (models.vision == nullptr)
        return bad_argument(fn,
                            which +
                                ": the context takes no images: create it with an mmproj that has a vision "
                                "encoder (kiln_context_options.mmproj)");
      auto image = models.vision->prepare_image(bytes);
      if (!image.ok()) return bad_argument(fn, which + ": " + image.error().message);
      item.image = std::move(*image);
    } else if (m.type == KILN_MEDIA_AUDIO) {
      if (models.audio == nullptr)
        return bad_argument(fn,
                            which +
                                ": the context takes no audio: create it with an mmproj that has an audio "
                                "encoder (kiln_context_options.mmproj)");
      auto chunks = models.audio->prepare_audio(bytes);
      if (!chunks.ok()) return bad_argument(fn, which + ": " + chunks.error().message);
      item.audio = std::move(*chunks);
    } else {
      return bad_argument(fn, which + ".type is " + std::to_string(static_cast<int>(m.type)) +
                                  ", neither KILN_MEDIA_IMAGE (0) nor KILN_MEDIA_AUDIO (1)");
    }
    items.push_back(std::move(item));
  }
  if (items.empty()) {
    out->append_text(tok.tokenize(text, /*add_special=*/true, parse_special));
  } else {
    auto mp = tokenize_media_prompt(tok, models, with_media_markers(text, items.size()), items,
                                    {.add_special = true, .parse_special = parse_special});
    if (!mp.ok()) return bad_argument(fn, mp.error().message);
    *out = std::move(*mp);
  }
  if (out->n_positions() == 0) return bad_argument(fn, "the prompt is empty");
  if (out->n_positions() >= ctx.n_ctx())
    return bad_argument(fn, "the prompt has " + std::to_string(out->n_positions()) +
                                " positions, more than the context of " + std::to_string(ctx.n_ctx()) +
                                " allows");
  return KILN_OK;
}

Result<size_t> decode_prompt(kiln_context& context, const MediaPrompt& prompt, int32_t seq) {
  Context& ctx = *context.context;
  ctx.seq_rm(seq, -1, -1);
  return decode_media_prompt(ctx, context.encoder.get(), prompt, 0,
                             {.seq = seq, .n_batch = ctx.n_batch(), .audio = context.audio_encoder.get()});
}

}  // namespace kiln::api

extern "C" {

kiln_status kiln_mmproj_load(kiln_model* model, const char* path, kiln_mmproj** out) {
  constexpr std::string_view fn = "kiln_mmproj_load";
  KILN_API_TRY(check_handle(fn, "model", model));
  KILN_API_TRY(check_pointer(fn, "path", path));
  KILN_API_TRY(check_pointer(fn, "out", out));
  return api_call(fn, [&] {
    auto has = mmproj_encoders(path);
    if (!has.ok()) return from_status(fn, has.error());
    auto m = std::make_unique<kiln_mmproj>();
    m->model = model;
    if (has->vision) {
      auto vision = VisionModel::load(path, *model->model);
      if (!vision.ok()) return from_status(fn, vision.error());
      m->vision = std::move(*vision);
    }
    if (has->audio) {
      auto audio = AudioModel::load(path, *model->model);
      if (!audio.ok()) return from_status(fn, audio.error());
      m->audio = std::move(*audio);
    }
    ++model->users;
    *out = m.release();
    register_handle(*out);
    return KILN_OK;
  });
}

kiln_status kiln_mmproj_free(kiln_mmproj* mmproj) {
  constexpr std::string_view fn = "kiln_mmproj_free";
  KILN_API_TRY(check_handle(fn, "mmproj", mmproj));
  if (mmproj->users > 0)
    return bad_argument(fn,
                        std::to_string(mmproj->users.load()) + " context(s) created with it are still alive");
  unregister_handle(mmproj);
  --mmproj->model->users;
  delete mmproj;
  return KILN_OK;
}

kiln_status kiln_decode_media_prompt(kiln_context* context, const char* prompt, const kiln_media* media,
                                     int64_t n_media, int32_t parse_special, int32_t seq,
                                     int64_t* n_positions, int64_t* logits_index) {
  constexpr std::string_view fn = "kiln_decode_media_prompt";
  KILN_API_TRY(check_handle(fn, "context", context));
  KILN_API_TRY(check_pointer(fn, "prompt", prompt));
  KILN_API_TRY(check_sequence(fn, "seq", seq));
  return api_call(fn, [&] {
    Arbiter::Use turn;  // the device token, with an arbiter (api/arbiter_api.cpp)
    KILN_API_TRY(take_turn(fn, *context->model->runtime, &turn));
    MediaPrompt mp;
    KILN_API_TRY(media_prompt(fn, *context, prompt, media, n_media, parse_special != 0, &mp));
    auto last = decode_prompt(*context, mp, seq);
    if (!last.ok()) return from_status(fn, last.error());
    if (n_positions != nullptr) *n_positions = mp.n_positions();
    if (logits_index != nullptr) *logits_index = static_cast<int64_t>(*last);
    return KILN_OK;
  });
}

}  // extern "C"
