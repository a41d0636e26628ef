// kiln.h: images (kiln_mmproj_load/free, kiln_decode_media_prompt) over llm/vision_model.h and
// llm/media_prompt.h, as `kiln run --image` uses them.
#include "api/handles.h"

using namespace kiln;
using namespace kiln::api;

namespace kiln::api {

kiln_status media_prompt(std::string_view fn, const kiln_context& context, const char* text,
                         const kiln_image* images, int64_t n_images, bool parse_special, MediaPrompt* out) {
  KILN_API_TRY(check_size(fn, "n_images", n_images));
  if (n_images > 0) KILN_API_TRY(check_pointer(fn, "images", images));
  if (n_images > 0 && context.mmproj == nullptr)
    return bad_argument(
        fn, "the context takes no images: create it with an mmproj (kiln_context_options.mmproj)");
  const Context& ctx = *context.context;
  const text::Tokenizer& tok = ctx.model().tokenizer();
  std::vector<std::shared_ptr<const PreparedImage>> prepared;
  for (int64_t i = 0; i < n_images; ++i) {
    const std::string which = "images[" + std::to_string(i) + "]";
    KILN_API_TRY(check_size(fn, which + ".size", images[i].size));
    if (images[i].size > 0) KILN_API_TRY(check_pointer(fn, which + ".data", images[i].data));
    auto image = context.mmproj->vision->prepare_image(
        std::span<const uint8_t>(images[i].data, static_cast<size_t>(images[i].size)));
    if (!image.ok()) return bad_argument(fn, which + ": " + image.error().message);
    prepared.push_back(std::move(*image));
  }
  if (prepared.empty()) {
    out->append_text(tok.tokenize(text, /*add_special=*/true, parse_special));
  } else {
    auto mp =
        tokenize_media_prompt(tok, context.mmproj->vision.get(), with_media_markers(text, prepared.size()),
                              prepared, {.add_special = true, .parse_special = parse_special});
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

}  // namespace kiln::api

extern "C" {

kiln_status kiln_mmproj_load(kiln_model* model, const char* path, kiln_mmproj** out) {
  constexpr std::string_view fn = "kiln_mmproj_load";
  KILN_API_TRY(check_handle(fn, "model", model));
  KILN_API_TRY(check_pointer(fn, "path", path));
  KILN_API_TRY(check_pointer(fn, "out", out));
  return api_call(fn, [&] {
    auto vision = VisionModel::load(path, *model->model);
    if (!vision.ok()) return from_status(fn, vision.error());
    auto m = std::make_unique<kiln_mmproj>();
    m->model = model;
    m->vision = std::move(*vision);
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

kiln_status kiln_decode_media_prompt(kiln_context* context, const char* prompt, const kiln_image* images,
                                     int64_t n_images, int32_t parse_special, int32_t seq,
                                     int64_t* n_positions, int64_t* logits_index) {
  constexpr std::string_view fn = "kiln_decode_media_prompt";
  KILN_API_TRY(check_handle(fn, "context", context));
  KILN_API_TRY(check_pointer(fn, "prompt", prompt));
  KILN_API_TRY(check_sequence(fn, "seq", seq));
  return api_call(fn, [&] {
    Arbiter::Use turn;  // the device token, with an arbiter (api/arbiter_api.cpp)
    KILN_API_TRY(take_turn(fn, *context->model->runtime, &turn));
    MediaPrompt mp;
    KILN_API_TRY(media_prompt(fn, *context, prompt, images, n_images, parse_special != 0, &mp));
    Context& ctx = *context->context;
    ctx.seq_rm(seq, -1, -1);
    auto last =
        decode_media_prompt(ctx, context->encoder.get(), mp, 0, {.seq = seq, .n_batch = ctx.n_batch()});
    if (!last.ok()) return from_status(fn, last.error());
    if (n_positions != nullptr) *n_positions = mp.n_positions();
    if (logits_index != nullptr) *logits_index = static_cast<int64_t>(*last);
    return KILN_OK;
  });
}

}  // extern "C"
