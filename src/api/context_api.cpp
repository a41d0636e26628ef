// kiln.h: contexts (create, decode, outputs, sequences, state files) over llm/context.h and
// llm/embeddings.h.
#include <algorithm>

#include "api/handles.h"
#include "llm/embeddings.h"
#include "llm/kv_cache.h"

using namespace kiln;
using namespace kiln::api;

static_assert(KILN_MAX_SEQUENCES == kMaxSequences, "kiln.h's KILN_MAX_SEQUENCES is llm's kMaxSequences");

namespace kiln::api {

kiln_status context_output(std::string_view fn, const kiln_context* context, int64_t index, bool embeddings,
                           const float** data, int64_t* n) {
  KILN_API_TRY(check_handle(fn, "context", context));
  KILN_API_TRY(check_size(fn, "index", index));
  KILN_API_TRY(check_pointer(fn, embeddings ? "embeddings" : "logits", data));
  KILN_API_TRY(check_pointer(fn, embeddings ? "n_embd" : "n_logits", n));
  const Context& ctx = *context->context;
  if (ctx.outputs_embeddings() != embeddings)
    return bad_argument(fn, embeddings ? "the context outputs logits (create it with embeddings = 1)"
                                       : "the context outputs embeddings, not logits");
  const std::span<const float> row =
      embeddings ? ctx.embeddings(static_cast<size_t>(index)) : ctx.logits(static_cast<size_t>(index));
  if (row.empty())
    return bad_argument(fn, "batch token " + std::to_string(index) +
                                " of the last decode has no output (not in the batch, or not marked)");
  *data = row.data();
  *n = static_cast<int64_t>(row.size());
  return KILN_OK;
}

}  // namespace kiln::api

extern "C" {

kiln_status kiln_context_default_options(kiln_context_options* options) {
  KILN_API_TRY(check_pointer("kiln_context_default_options", "options", options));
  const ContextOptions d;
  *options = kiln_context_options{
      .n_ctx = d.n_ctx, .n_batch = d.n_batch, .n_ubatch = d.n_ubatch, .embeddings = 0, .mmproj = nullptr};
  return KILN_OK;
}

kiln_status kiln_context_create(kiln_model* model, const kiln_context_options* options, kiln_context** out) {
  constexpr std::string_view fn = "kiln_context_create";
  KILN_API_TRY(check_handle(fn, "model", model));
  KILN_API_TRY(check_pointer(fn, "out", out));
  kiln_context_options o{};
  KILN_API_TRY(kiln_context_default_options(&o));
  if (options != nullptr) o = *options;
  KILN_API_TRY(check_size(fn, "n_ctx", o.n_ctx));
  if (o.n_batch < 1)
    return bad_argument(fn, "n_batch must be at least 1 (" + std::to_string(o.n_batch) + ")");
  if (o.n_ubatch < 1)
    return bad_argument(fn, "n_ubatch must be at least 1 (" + std::to_string(o.n_ubatch) + ")");
  kiln_mmproj* mmproj = o.mmproj;  // the context counts as its user
  if (mmproj != nullptr) {
    KILN_API_TRY(check_handle(fn, "options->mmproj", mmproj));
    if (mmproj->model != model) return bad_argument(fn, "options->mmproj was loaded for another model");
    if (o.embeddings != 0) return bad_argument(fn, "an embeddings context takes no mmproj");
  }
  return api_call(fn, [&] {
    Arbiter::Use turn;  // the device token, with an arbiter (api/arbiter_api.cpp)
    KILN_API_TRY(take_turn(fn, *model->runtime, &turn));
    DeviceRegistry& devices = *model->runtime->devices;
    Device& device = model->weights->device();
    auto c = std::make_unique<kiln_context>();
    c->model = model;
    c->backend = devices.new_backend(device);
    const ContextOptions co{.n_ctx = o.n_ctx,
                            .n_batch = o.n_batch,
                            .n_ubatch = o.n_ubatch,
                            .embeddings = o.embeddings != 0,
                            .input_embeddings = mmproj != nullptr,
                            .arena = &devices.arena(device),
                            .kv_on_host = model->kv_on_host};
    std::vector<ContextDevice> split;  // a split model: every device, each with a backend of the context's
    for (size_t i = 0; i < model->placed.size() && model->placed.size() > 1; ++i) {
      Device& d = model->placed[i]->device();
      Backend* b = c->backend.get();
      if (i > 0) {
        c->split_backends.push_back(devices.new_backend(d));
        b = c->split_backends.back().get();
      }
      split.push_back({model->placed[i], b, &devices.arena(d)});
    }
    auto ctx = split.empty() ? Context::create(model->weights, *c->backend, co) : Context::create(std::move(split), co);
    if (!ctx.ok()) return from_status(fn, ctx.error());
    c->context = std::move(*ctx);
    if (mmproj != nullptr) {
      // The decoder and the encoders take turns in the device's arena, as `kiln run --image`.
      if (mmproj->vision) {
        auto encoder = VisionEncoder::create(mmproj->vision, *c->backend, {.arena = &devices.arena(device)});
        if (!encoder.ok()) return from_status(fn, encoder.error());
        c->encoder = std::move(*encoder);
      }
      if (mmproj->audio) {
        auto encoder = AudioEncoder::create(mmproj->audio, *c->backend, {.arena = &devices.arena(device)});
        if (!encoder.ok()) return from_status(fn, encoder.error());
        c->audio_encoder = std::move(*encoder);
      }
      c->mmproj = mmproj;
      ++mmproj->users;
    }
    ++model->users;
    *out = c.release();
    register_handle(*out);
    return KILN_OK;
  });
}

kiln_status kiln_context_free(kiln_context* context) {
  KILN_API_TRY(check_handle("kiln_context_free", "context", context));
  unregister_handle(context);
  --context->model->users;
  if (context->mmproj != nullptr) --context->mmproj->users;
  delete context;
  return KILN_OK;
}

kiln_status kiln_context_n_ctx(const kiln_context* context, int64_t* n_ctx) {
  KILN_API_TRY(check_handle("kiln_context_n_ctx", "context", context));
  KILN_API_TRY(check_pointer("kiln_context_n_ctx", "n_ctx", n_ctx));
  *n_ctx = context->context->n_ctx();
  return KILN_OK;
}

kiln_status kiln_decode(kiln_context* context, const kiln_batch_token* tokens, int64_t n_tokens) {
  constexpr std::string_view fn = "kiln_decode";
  KILN_API_TRY(check_handle(fn, "context", context));
  KILN_API_TRY(check_size(fn, "n_tokens", n_tokens));
  KILN_API_TRY(check_pointer(fn, "tokens", tokens));
  return api_call(fn, [&] {
    Arbiter::Use turn;  // the device token, with an arbiter (api/arbiter_api.cpp)
    KILN_API_TRY(take_turn(fn, *context->model->runtime, &turn));
    Batch batch;
    for (int64_t i = 0; i < n_tokens; ++i) {
      const kiln_batch_token& t = tokens[i];
      batch.add(t.token, t.pos, t.seq, t.logits != 0);
    }
    return from_status(fn, context->context->decode(batch));  // checks ids, positions, sequences, size
  });
}

kiln_status kiln_get_logits(const kiln_context* context, int64_t index, const float** logits,
                            int64_t* n_logits) {
  return context_output("kiln_get_logits", context, index, /*embeddings=*/false, logits, n_logits);
}

kiln_status kiln_get_embeddings(const kiln_context* context, int64_t index, const float** embeddings,
                                int64_t* n_embd) {
  return context_output("kiln_get_embeddings", context, index, /*embeddings=*/true, embeddings, n_embd);
}

kiln_status kiln_embed(kiln_context* context, const int32_t* tokens, int64_t n_tokens, int32_t normalize,
                       float* out, int64_t capacity, int64_t* n_out) {
  constexpr std::string_view fn = "kiln_embed";
  KILN_API_TRY(check_handle(fn, "context", context));
  KILN_API_TRY(check_size(fn, "n_tokens", n_tokens));
  KILN_API_TRY(check_pointer(fn, "tokens", tokens));
  KILN_API_TRY(check_size(fn, "capacity", capacity));
  if (capacity > 0) KILN_API_TRY(check_pointer(fn, "out", out));
  KILN_API_TRY(check_pointer(fn, "n_out", n_out));
  return api_call(fn, [&] {
    Arbiter::Use turn;  // the device token, with an arbiter (api/arbiter_api.cpp)
    KILN_API_TRY(take_turn(fn, *context->model->runtime, &turn));
    const Model& model = context->context->model();
    auto pooling = model_pooling(model);
    if (!pooling.ok()) return from_status(fn, pooling.error());
    if (*pooling == Pooling::None)
      return fail(KILN_ERROR_FAILED, std::string(fn) + ": the model's pooling is none");
    auto v = embed_tokens(*context->context, std::span(tokens, static_cast<size_t>(n_tokens)), *pooling);
    if (!v.ok()) return from_status(fn, v.error());
    if (normalize != 0) normalize_euclidean(*v);
    std::copy_n(v->begin(), std::min<int64_t>(capacity, static_cast<int64_t>(v->size())), out);
    *n_out = static_cast<int64_t>(v->size());
    return KILN_OK;
  });
}

kiln_status kiln_seq_rm(kiln_context* context, int32_t seq, int32_t p0, int32_t p1) {
  KILN_API_TRY(check_handle("kiln_seq_rm", "context", context));
  if (seq >= 0) KILN_API_TRY(check_sequence("kiln_seq_rm", "seq", seq));
  context->context->seq_rm(seq, p0, p1);
  return KILN_OK;
}

kiln_status kiln_seq_cp(kiln_context* context, int32_t src, int32_t dst, int32_t p0, int32_t p1) {
  KILN_API_TRY(check_handle("kiln_seq_cp", "context", context));
  KILN_API_TRY(check_sequence("kiln_seq_cp", "src", src));
  KILN_API_TRY(check_sequence("kiln_seq_cp", "dst", dst));
  context->context->seq_cp(src, dst, p0, p1);
  return KILN_OK;
}

kiln_status kiln_seq_keep(kiln_context* context, int32_t seq) {
  KILN_API_TRY(check_handle("kiln_seq_keep", "context", context));
  KILN_API_TRY(check_sequence("kiln_seq_keep", "seq", seq));
  context->context->seq_keep(seq);
  return KILN_OK;
}

kiln_status kiln_seq_pos_max(const kiln_context* context, int32_t seq, int32_t* pos_max) {
  KILN_API_TRY(check_handle("kiln_seq_pos_max", "context", context));
  KILN_API_TRY(check_sequence("kiln_seq_pos_max", "seq", seq));
  KILN_API_TRY(check_pointer("kiln_seq_pos_max", "pos_max", pos_max));
  *pos_max = context->context->seq_pos_max(seq);
  return KILN_OK;
}

kiln_status kiln_state_save(kiln_context* context, int32_t seq, const int32_t* tokens, int64_t n_tokens,
                            const char* path) {
  constexpr std::string_view fn = "kiln_state_save";
  KILN_API_TRY(check_handle(fn, "context", context));
  KILN_API_TRY(check_sequence(fn, "seq", seq));
  KILN_API_TRY(check_size(fn, "n_tokens", n_tokens));
  if (n_tokens > 0) KILN_API_TRY(check_pointer(fn, "tokens", tokens));
  KILN_API_TRY(check_pointer(fn, "path", path));
  return api_call(fn, [&] {
    return from_status(
        fn, context->context->save_sequence(seq, std::span(tokens, static_cast<size_t>(n_tokens)), path));
  });
}

kiln_status kiln_state_load(kiln_context* context, int32_t seq, const char* path, int32_t* tokens,
                            int64_t capacity, int64_t* n_tokens) {
  constexpr std::string_view fn = "kiln_state_load";
  KILN_API_TRY(check_handle(fn, "context", context));
  KILN_API_TRY(check_sequence(fn, "seq", seq));
  KILN_API_TRY(check_pointer(fn, "path", path));
  KILN_API_TRY(check_size(fn, "capacity", capacity));
  if (capacity > 0) KILN_API_TRY(check_pointer(fn, "tokens", tokens));
  KILN_API_TRY(check_pointer(fn, "n_tokens", n_tokens));
  return api_call(fn, [&] {
    Arbiter::Use turn;  // the device token, with an arbiter (api/arbiter_api.cpp)
    KILN_API_TRY(take_turn(fn, *context->model->runtime, &turn));
    auto loaded = context->context->load_sequence(seq, path);
    if (!loaded.ok()) return from_status(fn, loaded.error());
    std::copy_n(loaded->begin(), std::min<int64_t>(capacity, static_cast<int64_t>(loaded->size())), tokens);
    *n_tokens = static_cast<int64_t>(loaded->size());
    return KILN_OK;
  });
}

}  // extern "C"
