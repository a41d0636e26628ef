#include "serve/model_router.h"

#include <algorithm>

#include "llm/audio_model.h"
#include "serve/server_state.h"

namespace kiln::serve {

const char* model_status_name(ModelStatus s) {
  switch (s) {
    case ModelStatus::Unloaded: return "unloaded";
    case ModelStatus::Loading: return "loading";
    case ModelStatus::Loaded: return "loaded";
    case ModelStatus::Sleeping: return "sleeping";
  }
  return "unknown";
}

namespace {

// A request's pins on each of the state's devices: the model's owner there, then the device's
// compute arena (an owner of its own, shared by every model there: a request in flight keeps it
// from eviction, so its passes never wait for room). No pins on a device without a manager.
using StatePins = std::vector<ResidencyManager::Pin>;

Result<StatePins> pin_state(const ServerState& st) {
  StatePins pins;
  for (const auto& w : st.placed) {
    Device& device = w->device();
    ResidencyManager* m = device.residency();
    if (m == nullptr) continue;
    KILN_ASSIGN_OR_RETURN(auto model, m->pin(w->owner()));
    pins.push_back(std::move(model));
    KILN_ASSIGN_OR_RETURN(auto arena, m->pin(st.devices->arena(device).resident_owner()));
    pins.push_back(std::move(arena));
  }
  return pins;
}

// Whether the state's memory is all on its devices.
bool resident(const ServerState& st) {
  for (const auto& w : st.placed) {
    ResidencyManager* m = w->device().residency();
    if (m != nullptr && !m->owner_resident(w->owner())) return false;
  }
  return true;
}

ServerOptions model_options(const ServerOptions& base, const ModelSpec& spec) {
  ServerOptions o = base;
  o.models.clear();
  if (spec.n_ctx) o.context.n_ctx = *spec.n_ctx;
  if (spec.n_parallel) o.n_parallel = *spec.n_parallel;
  if (spec.kv_unified) o.kv_unified = *spec.kv_unified;
  if (spec.kv_unified_per_slot) o.kv_unified_per_slot = *spec.kv_unified_per_slot;
  if (spec.n_gpu_layers) o.split.n_gpu_layers = *spec.n_gpu_layers;
  if (spec.split_mode) o.split.mode = *spec.split_mode;
  if (spec.tensor_split) o.split.tensor_split = *spec.tensor_split;
  if (spec.main_gpu) o.split.main_gpu = *spec.main_gpu;
  if (spec.overrides) o.split.overrides = *spec.overrides;
  if (spec.fit) o.split.fit = *spec.fit;
  if (spec.segmented) o.split.segmented = *spec.segmented;
  if (spec.mmproj) o.mmproj = *spec.mmproj;
  return o;
}

}  // namespace

struct ModelRouter::Entry {
  ModelSpec spec;
  ServerOptions options;  // base_ with spec's fields
  MmprojEncoders modalities;                   // of options.mmproj; none without one
  ModelStatus status = ModelStatus::Unloaded;  // Unloaded, Loading or Loaded (Sleeping is computed)
  std::shared_ptr<ServerState> st;             // while Loaded
  std::shared_ptr<const ModelInfo> info;       // since first loaded
  StatePins keep;                              // spec.pin: held while loaded (model and arena)
  int64_t active = 0;      // requests that hold or wait for the state (never unloaded by --models-max)
  int64_t pinned = 0;      // requests that hold a pin
  uint64_t last_use = 0;   // router clock at the last request
  Clock::time_point idle_since = Clock::now();
  bool slept = false;      // evicted for idleness since the last request
};

// A request's hold on a model: its pin, then the end of its activity.
class ModelRouter::Lease {
 public:
  Lease(std::shared_ptr<ServerState> st, StatePins pins, Arbiter::Use use, ModelRouter* router, Entry* e)
      : st_(std::move(st)), pins_(std::move(pins)), use_(std::move(use)), router_(router), entry_(e) {}
  ~Lease() {
    pins_.clear();
    router_->release(*entry_);
    use_.reset();  // the token may go once nothing is pinned
  }
  Lease(const Lease&) = delete;
  Lease& operator=(const Lease&) = delete;
  ServerState* get() const { return st_.get(); }

 private:
  std::shared_ptr<ServerState> st_;
  StatePins pins_;
  Arbiter::Use use_;
  ModelRouter* router_;
  Entry* entry_;
};

ModelRouter::ModelRouter(const ServerOptions& base, std::shared_ptr<DeviceRegistry> devices)
    : base_(base), devices_(std::move(devices)),
      timeout_(std::chrono::seconds(std::max(0, base.residency_timeout_seconds))) {
  bool sleeps = false;
  for (const ModelSpec& spec : base.models) {
    auto e = std::make_unique<Entry>();
    e->spec = spec;
    e->options = model_options(base, spec);
    if (!e->options.mmproj.empty()) {
      const auto has = mmproj_encoders(e->options.mmproj);
      if (has.ok()) e->modalities = *has;
    }
    sleeps = sleeps || spec.sleep_idle_seconds > 0;
    entries_.push_back(std::move(e));
  }
  if (sleeps) sleeper_ = std::thread([this] { idle_sleeper(); });
}

ModelRouter::~ModelRouter() {
  stop();
  if (sleeper_.joinable()) sleeper_.join();
  for (auto& e : entries_) e->keep.clear();
  entries_.clear();  // states (engines, contexts, weights) go before devices_
}

void ModelRouter::stop() {
  std::vector<std::shared_ptr<ServerState>> states;
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
    for (auto& e : entries_)
      if (e->st) states.push_back(e->st);
  }
  cv_.notify_all();
  for (auto& st : states) st->engine->stop();
}

ModelRouter::Entry* ModelRouter::find(const std::string& name) const {
  for (const auto& e : entries_)
    if (e->spec.name == name) return e.get();
  return nullptr;
}

bool ModelRouter::has(const std::string& name) const {
  std::lock_guard lock(mu_);
  return find(name) != nullptr;
}

bool ModelRouter::others_pinned(const Entry& e) const {
  return std::any_of(entries_.begin(), entries_.end(),
                     [&](const auto& o) { return o.get() != &e && o->pinned > 0; });
}

std::vector<ModelRouter::Listing> ModelRouter::list() const {
  std::vector<Listing> out;
  std::vector<std::shared_ptr<ServerState>> states;
  {
    std::lock_guard lock(mu_);
    for (const auto& e : entries_) {
      out.push_back({e->spec.name, e->spec.path, e->status, e->spec.pin, e->modalities.vision, e->modalities.audio});
      states.push_back(e->st);
    }
  }
  // The managers' mutexes are taken with the router's released.
  for (size_t i = 0; i < out.size(); ++i)
    if (out[i].status == ModelStatus::Loaded && states[i] && !resident(*states[i]))
      out[i].status = ModelStatus::Sleeping;
  return out;
}

std::shared_ptr<ServerState> ModelRouter::peek(const std::string& name) const {
  std::lock_guard lock(mu_);
  const Entry* e = find(name);
  return e ? e->st : nullptr;
}

std::shared_ptr<const ModelInfo> ModelRouter::info(const std::string& name) const {
  std::lock_guard lock(mu_);
  const Entry* e = find(name);
  return e ? e->info : nullptr;
}

bool ModelRouter::wait_for_room(std::unique_lock<std::mutex>& lock, const Entry& e, RoomWait& wait) {
  if (others_pinned(e)) return cv_.wait_until(lock, wait.deadline) == std::cv_status::no_timeout;
  const auto now = Clock::now();
  if (!wait.grace_end) wait.grace_end = std::min(wait.deadline, now + std::chrono::seconds(1));
  if (now >= *wait.grace_end) return false;
  cv_.wait_until(lock, std::min(*wait.grace_end, now + std::chrono::milliseconds(20)));
  return true;
}

std::optional<HttpError> ModelRouter::load_locked(std::unique_lock<std::mutex>& lock, Entry& e, RoomWait& wait) {
  const Clock::time_point deadline = wait.deadline;
  const std::string& name = e.spec.name;
  // --models-max: unload the least recently used model that no request holds.
  std::vector<std::shared_ptr<ServerState>> dropped;  // freed with the mutex released
  for (;;) {
    const auto loaded = std::count_if(entries_.begin(), entries_.end(),
                                      [](const auto& o) { return o->status != ModelStatus::Unloaded; });
    if (base_.models_max <= 0 || loaded < base_.models_max) break;
    Entry* victim = nullptr;
    for (const auto& o : entries_)
      if (o.get() != &e && o->status == ModelStatus::Loaded && o->active == 0 &&
          (!victim || o->last_use < victim->last_use))
        victim = o.get();
    if (victim) {
      dropped.push_back(std::move(victim->st));
      victim->keep.clear();
      victim->status = ModelStatus::Unloaded;
      continue;
    }
    if (stopping_) return HttpError{503, "the server is shutting down"};
    if (cv_.wait_until(lock, deadline) == std::cv_status::timeout)
      return HttpError{503, "cannot load model '" + name + "': " + std::to_string(base_.models_max) +
                                " models are loaded (--models-max) and every one serves a request"};
    if (e.status != ModelStatus::Unloaded) return std::nullopt;  // another request loads it
  }
  e.status = ModelStatus::Loading;
  lock.unlock();
  dropped.clear();
  Result<std::shared_ptr<ServerState>> built = make_error("");
  if (auto model = Model::load(e.spec.path); model.ok())
    built = build_state(e.options, std::move(*model), devices_);
  else
    built = model.error();
  if (built.ok()) {
    (*built)->name = name;                  // answers name the model as requests do
    for (const auto& backend : (*built)->backends)  // its own: the registry is shared
      backend->set_scratch_owner_name(backend->device().name() + " scratch (" + name + ")");
  }
  StatePins keep;
  if (built.ok() && e.spec.pin) {
    auto pin = pin_state(**built);
    if (pin.ok())
      keep = std::move(*pin);
    else
      built = pin.error();
  }
  std::shared_ptr<const ModelInfo> info;
  if (built.ok()) info = describe(**built);
  lock.lock();
  if (built.ok() && !stopping_) {
    e.st = std::move(*built);
    e.info = std::move(info);
    e.keep = std::move(keep);
    e.status = ModelStatus::Loaded;
    e.slept = false;
    cv_.notify_all();
    return std::nullopt;
  }
  e.status = ModelStatus::Unloaded;
  cv_.notify_all();
  if (built.ok()) return HttpError{503, "the server is shutting down"};
  const std::string why = "cannot load model '" + name + "': " + built.error().message;
  // Room may come when another model's request ends: wait for that (holding no pin), then retry.
  if (wait_for_room(lock, e, wait)) return std::nullopt;
  return HttpError{503, why};
}

std::variant<std::shared_ptr<ServerState>, HttpError> ModelRouter::acquire(const std::string& name, bool autoload) {
  const auto deadline = Clock::now() + timeout_;
  RoomWait room{.deadline = deadline, .grace_end = std::nullopt};
  {
    std::lock_guard lock(mu_);
    const Entry* e = find(name);
    if (e == nullptr) return HttpError{404, "model '" + name + "' not found (GET /v1/models lists them)"};
    if (!autoload && e->status == ModelStatus::Unloaded)
      return HttpError{400, "model '" + name + "' is not loaded (autoload is off: POST /models/load)"};
  }
  // The token first (without the router's mutex): the model loads and restores while this
  // process holds the device.
  auto use = use_device(arbiter_, base_, deadline);
  if (!use.ok()) return HttpError{503, use.error().message};
  std::unique_lock lock(mu_);
  Entry* e = find(name);  // entries are never removed: the same one
  ++e->active;  // waiting counts: --models-max does not unload it meanwhile (no pin is held)
  auto give_up = [&](HttpError err) -> std::variant<std::shared_ptr<ServerState>, HttpError> {
    --e->active;
    cv_.notify_all();
    return err;
  };
  for (;;) {
    if (stopping_) return give_up({503, "the server is shutting down"});
    if (e->status == ModelStatus::Loading) {
      if (cv_.wait_until(lock, deadline) == std::cv_status::timeout)
        return give_up({503, "model '" + name + "' is still loading after --residency-timeout " +
                                 std::to_string(timeout_.count() / 1000) + " s"});
      continue;
    }
    if (e->status == ModelStatus::Unloaded) {
      if (auto err = load_locked(lock, *e, room)) return give_up(*err);
      continue;
    }
    std::shared_ptr<ServerState> st = e->st;
    lock.unlock();
    auto pin = pin_state(*st);  // restores what was evicted, evicting unpinned models
    lock.lock();
    if (pin.ok()) {
      ++e->pinned;
      e->last_use = ++clock_;
      e->slept = false;
      auto lease = std::make_shared<Lease>(std::move(st), std::move(*pin), std::move(*use), this, e);
      return std::shared_ptr<ServerState>(lease, lease->get());
    }
    const std::string why = "no room for model '" + name + "': " + pin.error().message;
    const bool others = others_pinned(*e);
    if (!wait_for_room(lock, *e, room))
      return give_up({503, others ? why + " (waited --residency-timeout " + std::to_string(timeout_.count() / 1000) +
                                        " s for other models' requests to end)"
                                  : why});
  }
}

void ModelRouter::release(Entry& e) {
  {
    std::lock_guard lock(mu_);
    --e.pinned;
    --e.active;
    if (e.active == 0) e.idle_since = Clock::now();
  }
  cv_.notify_all();
}

std::optional<HttpError> ModelRouter::load(const std::string& name) {
  const auto deadline = Clock::now() + timeout_;
  RoomWait room{.deadline = deadline, .grace_end = std::nullopt};
  {
    std::lock_guard lock(mu_);
    const Entry* e = find(name);
    if (e == nullptr) return HttpError{404, "model '" + name + "' not found"};
    if (e->status != ModelStatus::Unloaded) return HttpError{400, "model '" + name + "' is already loaded"};
  }
  auto use = use_device(arbiter_, base_, deadline);  // the model loads while this process holds the device
  if (!use.ok()) return HttpError{503, use.error().message};
  std::unique_lock lock(mu_);
  Entry* e = find(name);
  if (e->status != ModelStatus::Unloaded) return HttpError{400, "model '" + name + "' is already loaded"};
  ++e->active;
  std::optional<HttpError> err;
  while (!err && e->status != ModelStatus::Loaded) {
    if (stopping_) {
      err = HttpError{503, "the server is shutting down"};
    } else if (e->status == ModelStatus::Unloaded) {
      err = load_locked(lock, *e, room);
    } else if (cv_.wait_until(lock, deadline) == std::cv_status::timeout) {  // another request loads it
      err = HttpError{503, "model '" + name + "' is still loading"};
    }
  }
  --e->active;
  cv_.notify_all();
  return err;
}

std::optional<HttpError> ModelRouter::unload(const std::string& name) {
  std::shared_ptr<ServerState> dropped;
  {
    std::lock_guard lock(mu_);
    Entry* e = find(name);
    if (e == nullptr) return HttpError{404, "model '" + name + "' not found"};
    if (e->status != ModelStatus::Loaded) return HttpError{400, "model '" + name + "' is not loaded"};
    dropped = std::move(e->st);
    e->keep.clear();
    e->status = ModelStatus::Unloaded;
  }
  cv_.notify_all();
  return std::nullopt;  // `dropped` goes here, or with the last request that holds it
}

Status ModelRouter::load_startup_models() {
  std::vector<std::string> names;
  for (const auto& e : entries_)
    if (e->spec.load_on_startup) names.push_back(e->spec.name);
  for (const std::string& name : names)
    if (auto err = load(name)) return make_error(err->message);
  return {};
}

Result<bool> ModelRouter::evict_idle_models() {
  std::vector<std::shared_ptr<ServerState>> states;
  {
    std::lock_guard lock(mu_);
    for (const auto& e : entries_)
      if (e->st) states.push_back(e->st);
  }
  // The managers' and engines' locks are taken with the router's released.
  for (const auto& st : states)
    if (!engine_idle(*st)) return false;
  for (const auto& st : states) KILN_TRY(evict_memory(*st));
  return true;
}

void ModelRouter::idle_sleeper() {
  std::unique_lock lock(mu_);
  while (!stopping_) {
    auto next = Clock::time_point::max();
    for (const auto& e : entries_) {
      if (e->spec.sleep_idle_seconds <= 0 || e->spec.pin || e->status != ModelStatus::Loaded || e->active > 0 ||
          e->slept)
        continue;
      const auto due = e->idle_since + std::chrono::seconds(e->spec.sleep_idle_seconds);
      if (due > Clock::now()) {
        next = std::min(next, due);
        continue;
      }
      // A stream whose handler returned still holds its lease (active > 0): the engine is idle.
      // An eviction that fails (no host memory for the KV copy) leaves the model resident until
      // its next request ends.
      e->slept = true;
      static_cast<void>(evict_memory(*e->st));
    }
    if (next == Clock::time_point::max())
      cv_.wait(lock);
    else
      cv_.wait_until(lock, next);
  }
}

}  // namespace kiln::serve
