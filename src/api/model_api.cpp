// kiln.h: models (load and place, metadata, vocabulary, chat template, evict and restore) over
// llm/model.h, llm/device_weights.h and the device's residency manager.
#include <nlohmann/json.hpp>

#include "api/handles.h"
#include "llm/model_placement.h"
#include "text/chat_template.h"

using namespace kiln;
using namespace kiln::api;

namespace {

// The split flags of `o` (device names and values checked by the parsers the commands use); `main`
// becomes the first of o.devices when they are given.
Result<SplitFlags> split_flags(std::string_view fn, const kiln_model_options& o, std::string* main) {
  SplitFlags f;
  auto check = [&](const char* field, const std::string& error) -> Status {
    if (error.empty()) return ok_status();
    return make_error(fn, ": ", field, ": ", error);
  };
  if (o.devices != nullptr && o.devices[0] != '\0') KILN_TRY(check("devices", parse_device_list(o.devices, main, &f.devices)));
  if (o.n_gpu_layers < KILN_ALL_LAYERS)
    return make_error(fn, ": n_gpu_layers ", o.n_gpu_layers, " (a layer count, or KILN_ALL_LAYERS)");
  f.n_gpu_layers = o.n_gpu_layers;
  if (o.split_mode != KILN_SPLIT_MODE_LAYER && o.split_mode != KILN_SPLIT_MODE_NONE)
    return make_error(fn, ": split_mode ", o.split_mode, " (KILN_SPLIT_MODE_LAYER or KILN_SPLIT_MODE_NONE)");
  f.mode = o.split_mode == KILN_SPLIT_MODE_NONE ? SplitMode::None : SplitMode::Layer;
  if (o.n_tensor_split < 0 || (o.n_tensor_split > 0 && o.tensor_split == nullptr) || o.n_tensor_split > 64)
    return make_error(fn, ": ", o.n_tensor_split, " tensor_split shares", o.tensor_split == nullptr ? " at NULL" : "");
  for (int32_t i = 0; i < o.n_tensor_split; ++i) {
    if (!(o.tensor_split[i] >= 0.0f) || o.tensor_split[i] > 1e30f)
      return make_error(fn, ": tensor_split[", i, "] = ", o.tensor_split[i], " (a share >= 0)");
    f.tensor_split.push_back(o.tensor_split[i]);
  }
  if (o.main_gpu < 0) return make_error(fn, ": main_gpu ", o.main_gpu, " (an index into devices)");
  f.main_gpu = o.main_gpu;
  if (o.override_tensor != nullptr && o.override_tensor[0] != '\0')
    KILN_TRY(check("override_tensor", parse_overrides(o.override_tensor, &f.overrides)));
  f.no_kv_offload = o.no_kv_offload != 0;
  f.segmented = o.segmented != 0;
  f.fit = o.fit != 0;
  if (o.fit_target_mib >= 0) f.fit_targets = {static_cast<size_t>(o.fit_target_mib) << 20};
  if (o.fit_n_ctx < 0) return make_error(fn, ": fit_n_ctx ", o.fit_n_ctx, " (0: the default context)");
  return f;
}

}  // namespace

extern "C" {

kiln_status kiln_model_default_options(kiln_model_options* options) {
  KILN_API_TRY(check_pointer("kiln_model_default_options", "options", options));
  *options = kiln_model_options{};
  options->n_gpu_layers = KILN_ALL_LAYERS;
  options->split_mode = KILN_SPLIT_MODE_LAYER;
  options->fit = 1;
  options->fit_target_mib = -1;
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
    kiln_model_options defaults;
    kiln_model_default_options(&defaults);
    const kiln_model_options& o = options != nullptr ? *options : defaults;
    std::string device_name = o.device != nullptr && o.device[0] != '\0' ? o.device : "cpu";
    auto flags = split_flags(fn, o, &device_name);
    if (!flags.ok()) return bad_argument(fn, flags.error().message);
    auto device = runtime->devices->find(device_name);
    if (!device.ok()) return bad_argument(fn, device.error().message);
    auto model = Model::load(path);
    if (!model.ok()) return from_status(fn, model.error());
    auto chat_template = choose_chat_template(**model, "");
    if (!chat_template.ok()) return from_status(fn, chat_template.error());
    WeightOptions weights;
    weights.copy_all = o.no_mmap != 0;
    weights.lock = o.mlock != 0;
    const ContextOptions fit_context{.n_ctx = o.fit_n_ctx};
    auto plan = plan_placement(*flags, device_name, *runtime->devices, **model, fit_context, weights, false);
    if (!plan.ok()) return from_status(fn, plan.error());
    auto placed = place_model(*model, *plan, device_name, *runtime->devices, weights);
    if (!placed.ok()) return from_status(fn, placed.error());
    auto m = std::make_unique<kiln_model>();
    m->runtime = runtime;
    m->model = std::move(*model);
    m->placed = std::move(placed->weights);
    m->weights = m->placed.front();
    m->kv_on_host = plan->context.kv_on_host;
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
    for (const auto& w : model->placed) {
      ResidencyManager& m = model->runtime->devices->residency(w->device());
      Status st = m.evict_owner(w->owner());
      for (const auto& segment : w->segments()) {
        if (st.ok()) st = m.evict_owner(segment->owner());
      }
      if (!st.ok()) return from_status(fn, st);
    }
    return KILN_OK;
  });
}

kiln_status kiln_model_restore(kiln_model* model) {
  constexpr std::string_view fn = "kiln_model_restore";
  KILN_API_TRY(check_handle(fn, "model", model));
  return api_call(fn, [&] {
    Arbiter::Use turn;  // the device token, with an arbiter (api/arbiter_api.cpp)
    KILN_API_TRY(take_turn(fn, *model->runtime, &turn));
    std::vector<ResidencyManager::Pin> pins;  // restore every device's share; unpinned at return
    for (const auto& w : model->placed) {
      auto pin = model->runtime->devices->residency(w->device()).pin(w->owner());
      if (!pin.ok()) return from_status(fn, pin.error());
      pins.push_back(std::move(*pin));
    }
    return KILN_OK;
  });
}

kiln_status kiln_model_is_resident(const kiln_model* model, int32_t* resident) {
  constexpr std::string_view fn = "kiln_model_is_resident";
  KILN_API_TRY(check_handle(fn, "model", model));
  KILN_API_TRY(check_pointer(fn, "resident", resident));
  return api_call(fn, [&] {
    *resident = 1;
    for (const auto& w : model->placed) {
      if (!model->runtime->devices->residency(w->device()).owner_resident(w->owner())) *resident = 0;
    }
    return KILN_OK;
  });
}

}  // extern "C"
