// The state of one model of a server (serve/server_state.h): building it from the options (placing
// the model on its devices, its encoders, draft model and engine), evicting it, describing it.
// server.cpp (the HTTP server) and model_router.cpp (many models) both use these; neither defines
// them, so a request's path reads in one direction: routes -> server -> router -> state.
#include "serve/server_state.h"

#include <algorithm>

#include "llm/model_chat_template.h"
#include "serve/completion_request.h"

namespace kiln::serve {
namespace {

// The backend `st`'s model (its context, encoders and draft model) computes with on `device`: the
// registry's, or in a server of many models (`shared`) one of its own, made at first use and kept
// in st.backends.
Backend& model_backend(ServerState& st, bool shared, Device& device) {
  if (!shared) return st.devices->backend(device);
  for (const auto& b : st.backends)
    if (&b->device() == &device) return *b;
  st.backends.push_back(st.devices->new_backend(device));
  return *st.backends.back();
}

// How the model's weights are held (--no-mmap, --mlock); a failed lock is a warning in the log.
WeightOptions weight_options(const ServerOptions& opt) {
  WeightOptions o{
      .copy_all = opt.no_mmap, .lock = opt.mlock, .on_lock_failure = {}, .prepare_threads = opt.n_threads};
  if (opt.log) o.on_lock_failure = [log = opt.log](const std::string& message) { log("warning: " + message); };
  return o;
}

// ContextOptions for `opt`: --kv-unified-per-slot sizes an unset context to slots x N.
ContextOptions server_context_options(const ServerOptions& opt, const HParams& hparams) {
  ContextOptions co = opt.context;
  const EngineOptions slots = engine_options(opt);
  if (opt.kv_unified_per_slot > 0 && co.n_ctx == 0) co.n_ctx = static_cast<int64_t>(slots.n_slots) * opt.kv_unified_per_slot;
  // Split slots take whole KV blocks each (llama-server pads a slot's context to 256 cells), so
  // that every slot's cells fit blocks of its own and nothing waits for room.
  if (!slots.kv_unified && slots.n_slots > 0) {
    const int64_t per_slot = std::max<int64_t>(context_size(co, hparams) / slots.n_slots, 1);
    co.n_ctx = slots.n_slots * ((per_slot + KvCache::kBlockCells - 1) / KvCache::kBlockCells * KvCache::kBlockCells);
  }
  return co;
}

}  // namespace

DeviceRegistryOptions registry_options(const ServerOptions& opt) {
  return {.n_threads = opt.n_threads,
          .sim = opt.sim_devices,
          .budgets = opt.budgets,
          .sim_shared_dir = opt.sim_shared_dir,
          .swap_dir = opt.swap_dir,
          .vulkan = opt.vulkan};
}

// engine_options and server_context_size are declared in serve/server.h (the commands size a server
// with them); they are the rules build_state follows.
EngineOptions engine_options(const ServerOptions& opt) {
  const bool auto_slots = opt.n_parallel == ServerOptions::kParallelAuto;
  return {.n_slots = auto_slots ? 4 : opt.n_parallel,
          .queue_limit = opt.queue_limit,
          .kv_unified = opt.kv_unified.value_or(auto_slots),
          .kv_unified_per_slot = opt.kv_unified_per_slot};
}

int64_t server_context_size(const ServerOptions& opt, const HParams& hparams) {
  return context_size(server_context_options(opt, hparams), hparams);
}

Result<std::shared_ptr<ServerState>> build_state(const ServerOptions& opt, std::shared_ptr<const Model> model,
                                                 std::shared_ptr<DeviceRegistry> devices) {
  const EngineOptions slots = engine_options(opt);
  if (slots.n_slots < 1 || slots.n_slots > kMaxSequences)
    return make_error("serve: --parallel ", opt.n_parallel, " is outside 1..", kMaxSequences);
  auto st = std::make_shared<ServerState>();
  st->model = model;
  st->name = model->name();
  auto chat = choose_chat_template(*model, opt.chat_template_source);
  if (!chat.ok()) return make_error("serve: ", chat.error().message);
  st->chat_template = std::move(chat->chat_template);
  st->chat_template_source = std::move(chat->source);
  st->chat_syntax = chat::detect_chat_syntax(*st->chat_template);
  st->bos_text = std::move(chat->bos_text);
  st->eos_text = std::move(chat->eos_text);
  const bool shared = devices != nullptr;
  if (shared) {
    st->devices = std::move(devices);
  } else {
    KILN_ASSIGN_OR_RETURN(st->devices, DeviceRegistry::create(registry_options(opt)));
  }
  const WeightOptions weights = weight_options(opt);  // the model's, its mmproj's and its draft model's
  ContextOptions co = server_context_options(opt, model->hparams());
  SplitFlags split = opt.split;
  split.devices_in_turns = !opt.arbiter_dir.empty();
  KILN_ASSIGN_OR_RETURN(const PlacementPlan plan,
                        plan_placement(split, opt.device, *st->devices, *model, co, weights, true));
  KILN_ASSIGN_OR_RETURN(PlacedModel placed, place_model(model, plan, opt.device, *st->devices, weights));
  if (opt.log && !plan.fit_summary.empty()) opt.log(st->name + ": " + plan.fit_summary);
  if (opt.log && !placed.layers.empty()) opt.log(st->name + ": " + placed.layers);
  st->placed = std::move(placed.weights);
  st->weights = st->placed.front();
  Device* device = &st->weights->device();
  const BackendOf backend_of = [st = st.get(), shared](Device& d) -> Backend& { return model_backend(*st, shared, d); };
  co.arena = &st->devices->arena(*device);  // every model of the device takes turns in it
  st->media_path = opt.media_path;
  st->max_media_bytes = opt.max_body;
  if (!opt.mmproj.empty()) {
    KILN_ASSIGN_OR_RETURN(const MmprojEncoders has, mmproj_encoders(opt.mmproj));
    if (has.vision) {
      KILN_ASSIGN_OR_RETURN(st->vision, VisionModel::load(opt.mmproj, *model));
    }
    if (has.audio) {
      KILN_ASSIGN_OR_RETURN(st->audio, AudioModel::load(opt.mmproj, *model));
    }
    st->decode_memory = std::make_unique<MemoryGate>(opt.image_decode_bytes);
    co.input_embeddings = true;
  }
  KILN_ASSIGN_OR_RETURN(st->ctx, create_placed_context(st->placed, *st->devices, co, backend_of));
  if (st->vision || st->audio) {
    auto found = encoder_device(*st->devices, opt.mmproj_device, *device);
    if (!found.ok()) return make_error("serve: ", found.error().message);
    Device* on = *found;
    const EncoderOptions eo = {
        .flash_attention = co.flash_attention, .arena = &st->devices->arena(*on), .weights = weights};
    if (st->vision) {
      KILN_ASSIGN_OR_RETURN(st->encoder, VisionEncoder::create(st->vision, backend_of(*on), eo));
    }
    if (st->audio) {
      KILN_ASSIGN_OR_RETURN(st->audio_encoder, AudioEncoder::create(st->audio, backend_of(*on), eo));
    }
  }
  if (n_ctx_per_slot(st->ctx->n_ctx(), slots) < 2)
    return make_error("serve: a context of ", st->ctx->n_ctx(), " tokens is too small for ", slots.n_slots,
                      " slots");
  if (opt.speculative.enabled() || !opt.draft_model.empty()) {  // Speculator::create checks the pair
    std::shared_ptr<const Model> draft;
    if (!opt.draft_model.empty()) {
      auto loaded = Model::load(opt.draft_model);
      if (!loaded.ok()) return make_error("serve: draft model: ", loaded.error().message);
      draft = std::move(*loaded);
    }
    ContextOptions dc = draft_context_options(co);
    dc.n_ctx = st->ctx->n_ctx();
    auto spec = Speculator::create(opt.speculative, *model, std::move(draft), [&](std::shared_ptr<const Model> d) {
      return place_draft_context(std::move(d), split, opt.device, opt.draft_placement, *st->devices, dc, weights,
                                 backend_of, [&](const std::string& line) {
                                   if (opt.log) opt.log(st->name + ": " + line);
                                 });
    });
    if (!spec.ok()) return make_error("serve: ", spec.error().message);
    st->speculator = std::move(*spec);
  }
  st->engine = std::make_unique<Engine>(*st->ctx, slots, st->speculator.get());
  return st;
}

bool engine_idle(const ServerState& st) {
  const EngineMetrics m = st.engine->metrics();
  return m.requests_processing == 0 && m.requests_deferred == 0;
}

Status evict_memory(ServerState& st) {
  std::vector<Device*> used;  // every device the state's memory is on, once each
  auto evict = [&used](Device& device, OwnerId owner) -> Status {
    if (std::find(used.begin(), used.end(), &device) == used.end()) used.push_back(&device);
    if (ResidencyManager* m = device.residency(); m != nullptr && owner != 0) KILN_TRY(m->evict_owner(owner));
    return ok_status();
  };
  std::vector<Context*> contexts{st.ctx.get()};
  if (st.speculator && st.speculator->draft_model()) contexts.push_back(&st.speculator->draft_model()->context());
  for (Context* ctx : contexts) {
    ctx->release_host_buffers();
    for (const auto& w : ctx->device_weights()) KILN_TRY(evict(w->device(), w->owner()));
  }
  if (st.encoder) KILN_TRY(evict(st.encoder->weights().device(), st.encoder->owner()));
  if (st.audio_encoder) KILN_TRY(evict(st.audio_encoder->weights().device(), st.audio_encoder->owner()));
  // Last, the devices' arenas: another model's request may pin one (the Error, the model's own
  // memory gone all the same).
  for (Device* device : used)
    if (ResidencyManager* m = device->residency()) KILN_TRY(m->evict_owner(st.devices->arena(*device).resident_owner()));
  return ok_status();
}

std::shared_ptr<const ModelInfo> describe(const ServerState& st) {
  auto info = std::make_shared<ModelInfo>();
  info->name = st.name;
  info->path = st.model->path();
  info->chat_template_source = st.chat_template_source;
  info->bos_text = st.bos_text;
  info->eos_text = st.eos_text;
  info->n_ctx = st.ctx->n_ctx();
  info->n_slots = st.engine->n_slots();
  info->n_ctx_slot = st.engine->n_ctx_slot();
  info->vision = st.vision != nullptr;
  info->audio = st.audio != nullptr;
  // The defaults are what the completion routes make of a request that sets nothing.
  CompletionRequest defaults;
  if (!parse_completion_fields(json::object(), st.model->tokenizer(), defaults)) {
    info->defaults = std::move(defaults.gen);
    info->stream_default = defaults.stream;
  }
  return info;
}

}  // namespace kiln::serve
