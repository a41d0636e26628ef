// kiln.h: models (load and place, metadata, vocabulary, chat template, evict and restore) over
// llm/model.h, llm/device_weights.h and the device's residency manager.
#include <nlohmann/json.hpp>

#include "api/handles.h"
#include "text/chat_template.h"

using namespace kiln;
using namespace kiln::api;

extern "C" {

kiln_status kiln_model_default_options(kiln_model_options* options) {
  KILN_API_TRY(check_pointer("kiln_model_default_options", "options", options));
  *options = kiln_model_options{};
  return KILN_OK;
}

kiln_status kiln_model_load(kiln_runtime* runtime, const char* path, const kiln_model_options* options,
                            kiln_model** out) {
  constexpr std::string_view fn = "kiln_model_load";
  KILN_API_TRY(check_handle(fn, "runtime", runtime));
  KILN_API_TRY(check_pointer(fn, "path", path));
  KILN_API_TRY(check_pointer(fn, "out", out));
  return api_call(fn, [&] {
    Arbiter::Use turn;  // the device token, with an arbiter (api/arbiter_api.cpp)
    KILN_API_TRY(take_turn(fn, *runtime, &turn));
    const kiln_model_options defaults{};
    const kiln_model_options& o = options != nullptr ? *options : defaults;
    const std::string device_name = o.device != nullptr && o.device[0] != '\0' ? o.device : "cpu";
    auto device = runtime->devices->find(device_name);
    if (!device.ok()) return bad_argument(fn, device.error().message);
    auto model = Model::load(path);
    if (!model.ok()) return from_status(fn, model.error());
    auto chat_template = choose_chat_template(**model, "");
    if (!chat_template.ok()) return from_status(fn, chat_template.error());
    WeightOptions placement;
    placement.copy_all = o.no_mmap != 0;
    placement.lock = o.mlock != 0;
    auto weights = DeviceWeights::create(*model, **device, std::move(placement));
    if (!weights.ok()) return from_status(fn, weights.error());
    auto m = std::make_unique<kiln_model>();
    m->runtime = runtime;
    m->model = std::move(*model);
    m->weights = std::move(*weights);
    m->chat_template.emplace(std::move(*chat_template));
    ++runtime->users;
    *out = m.release();
    register_handle(*out);
    track_model(**out);
    return KILN_OK;
  });
}

kiln_status kiln_model_free(kiln_model* model) {
  constexpr std::string_view fn = "kiln_model_free";
  KILN_API_TRY(check_handle(fn, "model", model));
  if (model->users > 0)
    return bad_argument(fn, std::to_string(model->users.load()) +
                                " context(s), sampler(s) or mmproj(s) of the model are still alive");
  untrack_model(*model);  // before it goes: the arbiter's yield evicts the tracked models
  unregister_handle(model);
  --model->runtime->users;
  delete model;
  return KILN_OK;
}

kiln_status kiln_model_n_vocab(const kiln_model* model, int32_t* n_vocab) {
  KILN_API_TRY(check_handle("kiln_model_n_vocab", "model", model));
  KILN_API_TRY(check_pointer("kiln_model_n_vocab", "n_vocab", n_vocab));
  *n_vocab = static_cast<int32_t>(model->model->hparams().n_vocab);
  return KILN_OK;
}

kiln_status kiln_model_n_embd(const kiln_model* model, int32_t* n_embd) {
  KILN_API_TRY(check_handle("kiln_model_n_embd", "model", model));
  KILN_API_TRY(check_pointer("kiln_model_n_embd", "n_embd", n_embd));
  *n_embd = static_cast<int32_t>(model->model->hparams().n_embd);
  return KILN_OK;
}

kiln_status kiln_model_n_ctx_train(const kiln_model* model, int64_t* n_ctx_train) {
  KILN_API_TRY(check_handle("kiln_model_n_ctx_train", "model", model));
  KILN_API_TRY(check_pointer("kiln_model_n_ctx_train", "n_ctx_train", n_ctx_train));
  *n_ctx_train = model->model->hparams().n_ctx_train;
  return KILN_OK;
}

kiln_status kiln_model_name(const kiln_model* model, char* buf, int64_t size, int64_t* length) {
  KILN_API_TRY(check_handle("kiln_model_name", "model", model));
  return write_text("kiln_model_name", model->model->name(), buf, size, length);
}

kiln_status kiln_model_meta_string(const kiln_model* model, const char* key, char* buf, int64_t size,
                                   int64_t* length) {
  constexpr std::string_view fn = "kiln_model_meta_string";
  KILN_API_TRY(check_handle(fn, "model", model));
  KILN_API_TRY(check_pointer(fn, "key", key));
  return api_call(fn, [&] {
    auto value = model->model->file().get_string(key);
    if (!value.ok()) return from_status(fn, value.error());
    return write_text(fn, *value, buf, size, length);
  });
}

kiln_status kiln_model_meta_int(const kiln_model* model, const char* key, int64_t* value) {
  constexpr std::string_view fn = "kiln_model_meta_int";
  KILN_API_TRY(check_handle(fn, "model", model));
  KILN_API_TRY(check_pointer(fn, "key", key));
  KILN_API_TRY(check_pointer(fn, "value", value));
  return api_call(fn, [&] {
    auto v = model->model->file().get_i64(key);
    if (!v.ok()) return from_status(fn, v.error());
    *value = *v;
    return KILN_OK;
  });
}

kiln_status kiln_model_token_text(const kiln_model* model, int32_t token, char* buf, int64_t size,
                                  int64_t* length) {
  constexpr std::string_view fn = "kiln_model_token_text";
  KILN_API_TRY(check_handle(fn, "model", model));
  KILN_API_TRY(check_token(fn, *model, token));
  return api_call(fn, [&] {
    auto piece = model->model->tokenizer().token_to_piece(token, /*special=*/true);
    if (!piece.ok()) return from_status(fn, piece.error());
    return write_text(fn, *piece, buf, size, length);
  });
}

kiln_status kiln_model_token_is_eog(const kiln_model* model, int32_t token, int32_t* is_eog) {
  constexpr std::string_view fn = "kiln_model_token_is_eog";
  KILN_API_TRY(check_handle(fn, "model", model));
  KILN_API_TRY(check_token(fn, *model, token));
  KILN_API_TRY(check_pointer(fn, "is_eog", is_eog));
  *is_eog = model->model->tokenizer().is_eog(token) ? 1 : 0;
  return KILN_OK;
}

kiln_status kiln_model_apply_chat_template(const kiln_model* model, const char* messages_json,
                                           const char* extra_json, int32_t add_generation_prompt, char* buf,
                                           int64_t size, int64_t* length) {
  constexpr std::string_view fn = "kiln_model_apply_chat_template";
  KILN_API_TRY(check_handle(fn, "model", model));
  KILN_API_TRY(check_pointer(fn, "messages_json", messages_json));
  return api_call(fn, [&] {
    auto messages_value = parse_json("messages_json", messages_json);
    if (!messages_value.ok()) return bad_argument(fn, messages_value.error().message);
    auto messages = chat_messages_from_json(*messages_value);
    if (!messages.ok()) return bad_argument(fn, messages.error().message);
    nlohmann::ordered_json extra = nlohmann::ordered_json::object();
    if (extra_json != nullptr) {
      auto e = parse_json("extra_json", extra_json);
      if (!e.ok()) return bad_argument(fn, e.error().message);
      if (!e->is_object()) return bad_argument(fn, "extra_json: not a JSON object");
      extra = std::move(*e);
    }
    const ModelChatTemplate& t = *model->chat_template;
    ChatRenderOptions render;
    render.messages = std::move(*messages);
    render.add_generation_prompt = add_generation_prompt != 0;
    render.bos_token = t.bos_text;
    render.eos_token = t.eos_text;
    render.extra_context = std::move(extra);
    auto text = t.chat_template.render(render);
    if (!text.ok()) return from_status(fn, text.error());
    return write_text(fn, *text, buf, size, length);
  });
}

kiln_status kiln_model_evict(kiln_model* model) {
  constexpr std::string_view fn = "kiln_model_evict";
  KILN_API_TRY(check_handle(fn, "model", model));
  return api_call(fn, [&] {
    DeviceWeights& w = *model->weights;
    return from_status(fn, model->runtime->devices->residency(w.device()).evict_owner(w.owner()));
  });
}

kiln_status kiln_model_restore(kiln_model* model) {
  constexpr std::string_view fn = "kiln_model_restore";
  KILN_API_TRY(check_handle(fn, "model", model));
  return api_call(fn, [&] {
    Arbiter::Use turn;  // the device token, with an arbiter (api/arbiter_api.cpp)
    KILN_API_TRY(take_turn(fn, *model->runtime, &turn));
    DeviceWeights& w = *model->weights;
    auto pin = model->runtime->devices->residency(w.device()).pin(w.owner());  // restores; unpins at return
    return pin.ok() ? KILN_OK : from_status(fn, pin.error());
  });
}

kiln_status kiln_model_is_resident(const kiln_model* model, int32_t* resident) {
  constexpr std::string_view fn = "kiln_model_is_resident";
  KILN_API_TRY(check_handle(fn, "model", model));
  KILN_API_TRY(check_pointer(fn, "resident", resident));
  return api_call(fn, [&] {
    const DeviceWeights& w = *model->weights;
    *resident = model->runtime->devices->residency(w.device()).owner_resident(w.owner()) ? 1 : 0;
    return KILN_OK;
  });
}

}  // extern "C"
