#include "serve/server.h"

#if defined(__GLIBC__)
#include <malloc.h>
#endif

#include <algorithm>
#include <cctype>

#include "llm/media_prompt.h"
#include "serve/api_json.h"
#include "serve/embedder.h"
#include "serve/http/http_server.h"
#include "serve/image_models.h"
#include "serve/model_catalog.h"
#include "serve/model_router.h"
#include "serve/routes_audio.h"
#include "serve/routes_images.h"
#include "serve/server_state.h"

namespace kiln::serve {
namespace {

// Gives the heap's free pages back to the OS (the KV cache and compute arena of a released
// state can sit below glibc's mmap threshold, so free() alone may keep them).
void trim_heap() {
#if defined(__GLIBC__)
  malloc_trim(0);
#endif
}

// The value of `key` in a query string ("model=a&x=1"), percent-decoded; nullopt when absent.
std::optional<std::string> query_value(std::string_view query, std::string_view key) {
  while (!query.empty()) {
    const size_t amp = query.find('&');
    const std::string_view part = query.substr(0, amp);
    query = amp == std::string_view::npos ? std::string_view() : query.substr(amp + 1);
    const size_t eq = part.find('=');
    if (part.substr(0, eq) != key) continue;
    const std::string_view raw = eq == std::string_view::npos ? std::string_view() : part.substr(eq + 1);
    std::string out;
    for (size_t i = 0; i < raw.size(); ++i) {
      if (raw[i] == '+') {
        out += ' ';
      } else if (raw[i] == '%' && i + 2 < raw.size() && std::isxdigit(static_cast<unsigned char>(raw[i + 1])) &&
                 std::isxdigit(static_cast<unsigned char>(raw[i + 2]))) {
        out += static_cast<char>(std::stoi(std::string(raw.substr(i + 1, 2)), nullptr, 16));
        i += 2;
      } else {
        out += raw[i];
      }
    }
    return out;
  }
  return std::nullopt;
}

}  // namespace

namespace {

json props_json(const ModelInfo& info, bool sleeping) {
  const SamplerParams& sp = info.defaults.sampler;
  json params = {{"n_predict", info.defaults.max_tokens},
                 {"max_tokens", info.defaults.max_tokens},
                 {"seed", -1},  // a request without "seed" draws a fresh one
                 {"temperature", sp.temperature},
                 {"top_k", sp.top_k},
                 {"top_p", sp.top_p},
                 {"min_p", sp.min_p},
                 {"typical_p", sp.typical_p},
                 {"repeat_last_n", sp.penalty_last_n},
                 {"repeat_penalty", sp.repeat_penalty},
                 {"presence_penalty", sp.presence_penalty},
                 {"frequency_penalty", sp.frequency_penalty},
                 {"stop", info.defaults.stop},
                 {"stream", info.stream_default},
                 {"cache_prompt", info.defaults.cache_prompt}};
  return {{"default_generation_settings",
           {{"id", 0},
            {"id_task", -1},
            {"n_ctx", info.n_ctx_slot},
            {"is_processing", false},
            {"params", params}}},
          {"total_slots", info.n_slots},
          {"model_path", info.path},
          {"model_alias", info.name},
          {"chat_template", info.chat_template_source},
          {"bos_token", info.bos_text},
          {"eos_token", info.eos_text},
          {"n_ctx", info.n_ctx},
          {"modalities", {{"vision", info.vision}, {"audio", info.audio}}},
          {"media_marker", std::string(kMediaMarker)},
          {"build_info", "kiln"},
          {"is_sleeping", sleeping}};
}

}  // namespace

// A request's hold on the state: ends its activity when the last copy goes.
class Server::Lease {
 public:
  Lease(std::shared_ptr<ServerState> state, Server* server, Arbiter::Use use)
      : state_(std::move(state)), server_(server), use_(std::move(use)) {}
  ~Lease() {
    state_.reset();
    use_.reset();  // the token may go once the state is not in use
    server_->end_activity();
  }
  Lease(const Lease&) = delete;
  Lease& operator=(const Lease&) = delete;
  ServerState* get() const { return state_.get(); }

 private:
  std::shared_ptr<ServerState> state_;
  Server* server_;
  Arbiter::Use use_;
};

size_t prequeue_jobs(const ServerOptions& options) {
  if (options.prequeue_jobs != 0) return options.prequeue_jobs;
  return std::max<size_t>(4, 2 * static_cast<size_t>(std::thread::hardware_concurrency()));
}

std::optional<MemoryGate::Lease> RouteContext::admit(const http::Request& req, http::Exchange& ex) const {
  MemoryGate& gate = server.prequeue_memory();
  const size_t need = req.body.size() * kPrequeueBytesPerBodyByte;
  MemoryGate::Lease lease;
  if (gate.take(need, lease, kPrequeueHoldWait)) return lease;
  const std::string mib = std::to_string(gate.capacity() >> 20) + " MiB";
  if (need > gate.capacity()) {
    send_error(ex, {413, "the request body needs " + std::to_string(need >> 20) +
                             " MiB of work before the queue, more than the " + mib + " the server gives it"});
  } else if (need <= gate.capacity() - gate.in_use()) {
    send_error(ex, {503, "the server is busy: " + std::to_string(gate.max_holds()) +
                             " requests are being prepared (parsed, rendered, tokenized) at once, its limit; retry"});
  } else {
    send_error(ex, {503, "the server is busy: other requests hold the " + mib +
                             " it gives work before the queue; retry"});
  }
  return std::nullopt;
}

std::shared_ptr<ServerState> RouteContext::ready(http::Exchange& ex, const json& body) const {
  ModelRouter* router = server.router();
  if (router == nullptr) {
    auto st = server.acquire();
    if (st.ok()) return *st;
    send_error(ex, {503, st.error().message});
    return nullptr;
  }
  auto it = body.find("model");
  if (it == body.end() || !it->is_string()) {
    send_error(ex, {400, "field 'model' must name one of the server's models (GET /v1/models)"});
    return nullptr;
  }
  const std::string name = it->get<std::string>();
  if (ImageModels* images = server.images(); images != nullptr && images->has(name)) {
    send_error(ex, {400, "model '" + name + "' is an image model: it answers POST /v1/images/generations, "
                         "/v1/images/edits and /sdapi/v1/txt2img, /sdapi/v1/img2img"});
    return nullptr;
  }
  auto got = router->acquire(name, options.models_autoload);
  if (auto* e = std::get_if<HttpError>(&got)) {
    send_error(ex, *e);
    return nullptr;
  }
  return std::get<std::shared_ptr<ServerState>>(std::move(got));
}

std::shared_ptr<DeviceRegistry> RouteContext::devices() const {
  if (ModelRouter* router = server.router()) return router->devices();
  auto st = server.peek();
  return st ? st->devices : nullptr;
}

std::optional<RouteContext::Look> RouteContext::look(const http::Request& req, http::Exchange& ex) const {
  Look out;
  if (ModelRouter* router = server.router()) {
    const auto name = query_value(req.query, "model");
    if (!name) {
      send_error(ex, {400, "this server serves many models: name one with ?model=NAME (GET /v1/models)"});
      return std::nullopt;
    }
    if (!router->has(*name)) {
      send_error(ex, {404, "model '" + *name + "' not found"});
      return std::nullopt;
    }
    out.info = router->info(*name);
    out.st = router->peek(*name);
    if (!out.info) {
      send_error(ex, {503, "model '" + *name + "' has not been loaded yet"});
      return std::nullopt;
    }
    const auto listing = router->list();
    out.sleeping = std::any_of(listing.begin(), listing.end(), [&](const ModelRouter::Listing& l) {
      return l.name == *name && l.status == ModelStatus::Sleeping;
    });
    return out;
  }
  out.info = server.info();
  if (!out.info) {
    send_error(ex, {503, "the model is loading"});
    return std::nullopt;
  }
  out.st = server.peek();
  out.sleeping = server.sleeping();
  return out;
}

std::vector<SlotInfo> RouteContext::Look::slots() const {
  if (st) return st->engine->slots();
  std::vector<SlotInfo> out;
  for (int32_t i = 0; info && i < info->n_slots; ++i) {
    SlotInfo s{};
    s.id = i;
    out.push_back(s);
  }
  return out;
}

Server::Server(ServerOptions options) : opt_(std::move(options)) {}

Server::~Server() {
  stop();
  arbiter_.reset();  // after every lease (stop() ended the requests)
}

void Server::log(const std::string& message) const {
  if (opt_.log) opt_.log(message);
}

Result<int> Server::listen(const std::string& host, int port) {
  KILN_ASSERT(http_ == nullptr, "Server::listen called twice");
  http::Router router;
  routes(router);
  http::HttpOptions o;
  o.limits.max_body = opt_.max_body;
  o.head_timeout = std::chrono::milliseconds(opt_.head_timeout_ms);
  o.io_timeout = std::chrono::seconds(opt_.timeout_seconds);
  o.reuse_port = opt_.reuse_port;
  o.cors_origins = opt_.cors_origins;
  // Each generation request holds a worker while it waits: enough for every slot and the queue,
  // and a few for the other routes.
  // With many models, every model's slots.
  const size_t n_models = std::max<size_t>(1, opt_.models.size());
  o.max_workers = static_cast<size_t>(engine_options(opt_).n_slots) * n_models +
                  static_cast<size_t>(opt_.queue_limit + 8);
  o.error_response = [](int status, std::string_view message) {
    return error_response({status, std::string(message)});
  };
  o.log = opt_.log;
  auto server = std::make_unique<http::HttpServer>(std::move(router), std::move(o));
  auto bound = server->listen(host, port);
  if (!bound.ok()) return bound.error();
  http_ = std::move(server);
  return *bound;
}

Status Server::attach_models() {
  KILN_ASSERT(!opt_.models.empty() && router_ == nullptr, "Server::attach_models: no models, or attached twice");
  KILN_ASSIGN_OR_RETURN(std::shared_ptr<DeviceRegistry> devices, DeviceRegistry::create(registry_options(opt_)));
  if (auto device = devices->find(opt_.device); !device.ok()) return device.error();
  // The text models go to the router, the image models to ImageModels, on the same registry.
  classify_models(opt_.models);
  ServerOptions text = opt_;
  std::vector<ModelSpec> image_specs;
  std::erase_if(text.models, [&image_specs](const ModelSpec& m) {
    if (m.kind != ModelKind::Image) return false;
    image_specs.push_back(m);
    return true;
  });
  if (!image_specs.empty()) {
    if (!opt_.arbiter_dir.empty())
      return make_error("serve: --arbiter does not cover image models yet (model '", image_specs[0].name, "')");
    const WeightOptions weights{.copy_all = opt_.no_mmap, .lock = opt_.mlock, .on_lock_failure = {},
                                .prepare_threads = opt_.n_threads};
    images_ = std::make_unique<ImageModels>(std::move(image_specs), devices, opt_.device, weights,
                                            opt_.queue_limit);
    images_view_.store(images_.get(), std::memory_order_release);
  }
  auto router = std::make_unique<ModelRouter>(text, std::move(devices));
  if (!opt_.arbiter_dir.empty()) {
    // A pinned model never leaves the device, so this process could never yield it.
    for (const ModelSpec& spec : opt_.models)
      if (spec.pin)
        return make_error("serve: --arbiter: model '", spec.name,
                          "' is pinned (pin in the preset), and a pinned model cannot leave the device when "
                          "another process needs it");
    KILN_TRY(open_arbiter([this, r = router.get()]() -> Result<bool> {
      KILN_ASSIGN_OR_RETURN(const bool yielded, r->evict_idle_models());
      if (yielded) log("arbiter: yielded " + opt_.device + " to another process");
      return yielded;
    }));
    router->set_arbiter(arbiter_.get());
  }
  router_ = std::move(router);
  router_view_.store(router_.get(), std::memory_order_release);
  return router_->load_startup_models();
}

Status Server::attach(std::shared_ptr<const Model> model) {
  KILN_ASSERT(model != nullptr, "Server::attach: no model");
  if (opt_.embeddings) {
    // A model kiln cannot embed (rank pooling, non-causal attention) is refused at load.
    if (auto pooling = server_pooling(opt_, *model); !pooling.ok())
      return make_error("serve: --embeddings: ", pooling.error().message);
  }
  KILN_TRY(open_arbiter([this] { return yield_device(); }));
  KILN_ASSIGN_OR_RETURN(Arbiter::Use use, use_device());  // the model loads while this process holds the device
  KILN_ASSIGN_OR_RETURN(auto st, build_state(opt_, std::move(model), nullptr));
  auto info = describe(*st);
  {
    std::lock_guard lock(mutex_);
    state_ = std::move(st);
    info_ = std::move(info);
    asleep_ = false;
    last_activity_ = Clock::now();
  }
  cv_.notify_all();
  if (opt_.sleep_idle_seconds > 0 && !sleeper_.joinable()) sleeper_ = std::thread([this] { sleeper(); });
  return {};
}

std::shared_ptr<ServerState> Server::lease(std::shared_ptr<ServerState> st, Arbiter::Use use) {
  ++active_;
  auto l = std::make_shared<Lease>(std::move(st), this, std::move(use));
  return std::shared_ptr<ServerState>(l, l->get());
}

Result<Arbiter::Use> use_device(Arbiter* arbiter, const ServerOptions& options,
                                std::chrono::steady_clock::time_point deadline) {
  if (arbiter == nullptr) return Arbiter::Use();
  auto use = arbiter->use(deadline);
  if (!use.ok())
    return make_error("the device ", options.device, " is busy in another process: ", use.error().message,
                      " (--residency-timeout ", options.residency_timeout_seconds, ")");
  return use;
}

Result<Arbiter::Use> Server::use_device() {
  return serve::use_device(arbiter_.get(), opt_, Clock::now() + std::chrono::seconds(opt_.residency_timeout_seconds));
}

Status Server::open_arbiter(Arbiter::YieldHook yield) {
  if (opt_.arbiter_dir.empty() || arbiter_) return {};
  KILN_ASSIGN_OR_RETURN(arbiter_, Arbiter::open(opt_.arbiter_dir, std::move(yield)));
  return {};
}

Result<bool> Server::yield_device() {
  const auto st = peek();
  if (!st) return true;  // asleep or stopping: nothing of ours is on the device
  if (!engine_idle(*st)) return false;
  KILN_TRY(evict_memory(*st));  // as idle sleep does; an owner a pass pins keeps the token here
  log("arbiter: yielded " + opt_.device + " to another process");
  return true;
}

void Server::end_activity() {
  bool idle = false;
  {
    std::lock_guard lock(mutex_);
    idle = --active_ == 0;
    last_activity_ = Clock::now();
  }
  cv_.notify_all();
  // The last request out gives the heap's free pages back: many connections and requests at once
  // leave free memory spread through glibc's arenas that free() alone keeps.
  if (idle) trim_heap();
}

Result<std::shared_ptr<ServerState>> Server::acquire() {
  // The token first: the model's first pass restores it on the device.
  KILN_ASSIGN_OR_RETURN(Arbiter::Use use, use_device());
  bool woke = false;
  Result<std::shared_ptr<ServerState>> out = make_error("the server is shutting down");
  {
    std::lock_guard lock(mutex_);
    if (stopping_) return out;
    if (!state_) return make_error("the model is loading");
    woke = std::exchange(asleep_, false);
    out = lease(state_, std::move(use));
  }
  if (woke) log("awake: a request needs the model; its memory comes back with the first pass");
  return out;
}

std::shared_ptr<ServerState> Server::peek() const {
  std::lock_guard lock(mutex_);
  return state_;
}

std::shared_ptr<const ModelInfo> Server::info() const {
  std::lock_guard lock(mutex_);
  return info_;
}

bool Server::sleeping() const {
  std::lock_guard lock(mutex_);
  return asleep_;
}

void Server::sleeper() {
  const auto idle = std::chrono::seconds(opt_.sleep_idle_seconds);
  std::unique_lock lock(mutex_);
  while (!stopping_) {
    if (!state_ || asleep_ || active_ > 0) {
      cv_.wait(lock);
      continue;
    }
    const auto now = Clock::now();
    if (now < last_activity_ + idle) {
      cv_.wait_until(lock, last_activity_ + idle);
      continue;
    }
    // A stream whose handler returned still generates in the engine: that is activity too.
    if (!engine_idle(*state_)) {
      last_activity_ = now;
      continue;
    }
    // Asleep from here: a request that comes during the eviction wakes it again, and its passes
    // pin the model (the manager serializes them with the eviction).
    asleep_ = true;
    std::shared_ptr<ServerState> st = state_;
    lock.unlock();
    const Status evicted = evict_memory(*st);
    st.reset();
    trim_heap();
    if (evicted.ok())
      log("sleeping: the model's memory was released after " + std::to_string(opt_.sleep_idle_seconds) +
          " s idle");
    else
      log("not sleeping: " + evicted.error().message);  // its cause: a request pinned the model, a full swap folder...
    lock.lock();
  }
}

void Server::stop() {
  std::shared_ptr<ServerState> st;
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
    st = state_;
  }
  cv_.notify_all();
  if (arbiter_) arbiter_->close();  // requests waiting for the device give up
  if (st) st->engine->stop();        // ends every generation: their handlers answer and return
  st.reset();
  if (router_) router_->stop();
  if (images_) images_->stop();
  if (sleeper_.joinable()) sleeper_.join();
  // Their last bytes get a moment to go out; then every connection closes.
  if (http_) http_->stop(std::chrono::milliseconds(1000));
}

void Server::routes(http::Router& router) {
  router.set_guard([this](const http::Request& req) -> std::optional<http::Response> {
    if (opt_.api_key.empty() || req.path == "/health" || req.path == "/v1/health") return std::nullopt;
    if (req.header("Authorization") == "Bearer " + opt_.api_key) return std::nullopt;
    return error_response({401, "invalid or missing API key (send 'Authorization: Bearer KEY')"});
  });
  // Health and properties look at the server without waking it, on the I/O thread: they answer
  // however busy the workers are.
  auto health = [this](const http::Request&, http::Exchange& ex) {
    if (!this->router() && !info()) return send_error(ex, {503, "the model is loading"});
    json body = {{"status", "ok"}};
    if (sleeping()) body["sleeping"] = true;
    send_json(ex, body);
  };
  const http::RouteOptions inline_route{.dispatch = http::Dispatch::Inline};
  router.get("/health", health, inline_route);
  router.get("/v1/health", health, inline_route);
  router.get(
      "/props",
      [this](const http::Request& req, http::Exchange& ex) {
        const RouteContext rc{opt_, *this};
        if (const auto look = rc.look(req, ex)) send_json(ex, props_json(*look->info, look->sleeping));
      },
      inline_route);
  const RouteContext rc{opt_, *this};
  add_model_routes(router, rc);
  add_info_routes(router, rc);
  add_token_routes(router, rc);
  add_completion_routes(router, rc);
  add_embedding_routes(router, rc);
  add_audio_routes(router, rc);
  add_image_routes(router, rc);
}

}  // namespace kiln::serve
