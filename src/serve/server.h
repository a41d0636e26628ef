// Server: kiln's OpenAI-compatible HTTP server (llama-server's routes). The routes live in
// routes_*.cpp (see server_state.h for the list):
//   GET  /health, /v1/health    503 while the model first loads, then 200 {"status": "ok"}
//                               (asleep: {"status": "ok", "sleeping": true})
//   GET  /props                 llama-server's server properties (is_sleeping included)
//   GET  /v1/models, /slots
//   GET  /metrics               Prometheus text (llama-server's metric names, plus memory gauges)
//   GET  /v1/memory             the memory breakdown per device and model (JSON)
//   POST /v1/completions, /v1/chat/completions   (stream false, or SSE chunks then [DONE])
//   POST /v1/chat/completions/control            (ends a completion's reasoning block)
//   POST /completion                             (llama-server's native shape)
//   POST /v1/embeddings, /embeddings             (with options.embeddings)
//   POST /tokenize, /detokenize                  (llama-server's shapes)
//   POST /apply-template        {"messages": [...]} -> {"prompt": "<the rendered chat>"}
// Errors use OpenAI's shape {"error": {"message", "type", "code"}}, for the HTTP layer's own
// refusals too (404, 405, 408, 411, 413, 431, ...). With --api-key every route but the health
// checks wants "Authorization: Bearer KEY". The HTTP layer (http/http_server.h) bounds what
// clients can hold: head and body deadlines, a write timeout, body and head size limits.
//
// Lifecycle: listen() (port 0 picks a free one) starts the HTTP threads; attach() gives it the
// model; stop() cancels every generation (in-flight answers end with 503, streams with an error
// event), gives their answers a moment to go out, and closes every connection. A client that
// disconnects cancels its generation at once; one that stops reading a stream pauses it and is
// dropped after options.timeout_seconds.
//
// Idle sleep (options.sleep_idle_seconds > 0): after that many seconds with no request holding
// the state (see acquire()) and no generation in the engine, the model's memory is evicted
// (evict_memory in server_state.h: weights, compute arena, the KV cache off the host, the draft
// model's) and free heap memory is given back to the OS. The state stays: engine, slots and their
// token history, the mapped file. The next request that needs the model (acquire()) wakes it: its
// first pass restores the memory bit for bit, and a returning conversation reuses its prompt
// cache. Routes that only look (health, /props, /v1/models, /slots, /metrics, /v1/memory) use
// peek()/info(): they never wake it and are not activity.
//
// Arbiter (options.arbiter_dir): the models' device is shared with other processes by a token
// (runtime/arbiter.h). attach() and every acquire() (with many models: ModelRouter::acquire and
// load) first take a use of the token (waiting up to residency_timeout_seconds; the request's
// lease keeps it), so a model is loaded, woken and restored only while this process holds it.
// When another process waits and no lease is alive, the arbiter's monitor thread yields: it
// evicts every model's residents from the device (the next request's decode restores them,
// bit-exact) and releases the token.
//
// Thread-safety: listen/attach/stop from one controlling thread; acquire/peek/info/sleeping from
// any thread (handlers run on the HTTP layer's worker threads).
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "backends/device_registry.h"
#include "llm/model_placement.h"
#include "backends/sim/sim_device.h"
#include "core/result.h"
#include "llm/context.h"
#include "llm/model.h"
#include "llm/speculative/options.h"
#include "runtime/arbiter.h"
#include "serve/engine.h"
#include "serve/memory_gate.h"
#include "text/grammar/work_budget.h"

namespace kiln::serve {

namespace http {
class HttpServer;
class Router;
}  // namespace http
struct ServerState;
struct ModelInfo;
class ModelRouter;
class ImageModels;

// What a model of a server of many models makes: text (a GGUF language model, served by the
// ModelRouter) or images (a Stable Diffusion 1.x model, served by ImageModels).
enum class ModelKind { Text, Image };
const char* model_kind_name(ModelKind kind);  // "text", "image"

// One model of a server of many models (serve/model_router.h): -m NAME=PATH, a .gguf of
// --models-dir, or a section of --models-preset.
struct ModelSpec {
  std::string name;                 // what a request's "model" field names
  std::string path;                 // its GGUF file; an image model's single-file checkpoint
  // Text, or Image for a checkpoint holding a UNet (classify_models) or a preset section naming
  // an image model's parts.
  ModelKind kind = ModelKind::Text;
  // An image model's parts (preset keys diffusion-model, clip_l, vae, taesd; sd-cli's flags of
  // the same names); empty when not given.
  std::string diffusion_model, clip_l, vae, taesd;
  std::optional<int64_t> n_ctx;     // KV cells (ContextOptions::n_ctx); none: the server's
  std::optional<int32_t> n_parallel;  // slots; none: the server's (--parallel)
  std::optional<bool> kv_unified;     // none: the server's (-kvu / -no-kvu)
  std::optional<int32_t> kv_unified_per_slot;  // none: the server's (--kv-unified-per-slot)
  // Placement keys (n-gpu-layers, split-mode, tensor-split, main-gpu, override-tensor, fit,
  // segmented); none: the server's flags.
  std::optional<int64_t> n_gpu_layers;
  std::optional<SplitMode> split_mode;
  std::optional<std::vector<float>> tensor_split;
  std::optional<int32_t> main_gpu;
  std::optional<std::vector<std::pair<std::string, std::string>>> overrides;
  std::optional<bool> fit;
  std::optional<bool> segmented;
  std::optional<std::string> mmproj;  // preset key mmproj: its projector; none: the server's --mmproj
  bool pin = false;                 // never evicted while loaded (nor the device's compute arena)
  bool load_on_startup = false;     // loaded when the server starts
  int32_t sleep_idle_seconds = 0;   // > 0: evicted (sleeping) after this many idle seconds
};

struct ServerOptions {
  // Slots (-np); kParallelAuto: 4 slots over one unified KV pool, llama-server's default.
  static constexpr int32_t kParallelAuto = -1;
  int32_t n_parallel = 4;
  // -kvu / -no-kvu: one KV pool every slot may fill (EngineOptions::kv_unified); unset: unified
  // exactly when n_parallel is kParallelAuto.
  std::optional<bool> kv_unified;
  // --kv-unified-per-slot N: a slot's context is at most N tokens; with context.n_ctx unset (0),
  // the cache has slots x N cells.
  int32_t kv_unified_per_slot = 0;
  int32_t queue_limit = 64;          // requests waiting for a slot before 503
  std::string api_key;               // empty: no authentication
  std::string chat_template_source;  // empty: the model's tokenizer.chat_template, else ChatML
  int32_t n_threads = 0;             // compute threads; 0: every hardware thread
  std::string device = "cpu";        // the device the model runs on (a DeviceRegistry name)
  // A model split over devices or fitted to them (--device A,B, -ngl, -sm, -ts, -mg, -ot, --fit,
  // -fitt; llm/model_placement.h). The server's fit never shrinks the context (its slots share it).
  SplitFlags split;
  std::vector<SimDeviceOptions> sim_devices;  // sim devices to create (--sim-capacity)
  bool vulkan = false;                        // look for Vulkan devices (a model names one)
  std::vector<DeviceBudget> budgets;          // residency budgets per device (--max-mem)
  std::string sim_shared_dir;  // --sim-shared: sim capacity shared with other processes (SimLedger)
  std::string swap_dir;        // --swap-dir: evicted KV caches go to files there, not host memory
  bool no_mmap = false;        // --no-mmap: the model's weights copied (WeightOptions::copy_all)
  bool mlock = false;          // --mlock: the model's weights locked in RAM; a failed lock is logged
  // --arbiter DIR: take turns on `device` with other processes by the token in DIR
  // (runtime/arbiter.h); a request waits for it within residency_timeout_seconds, then 503.
  std::string arbiter_dir;
  ContextOptions context;            // n_ctx is shared by the slots
  bool embeddings = false;           // serve POST /v1/embeddings (--embeddings)
  std::string mmproj;                // the model's vision projector (--mmproj); empty: text only.
  std::string mmproj_device;         // its encoders' device (-mmdev, --no-mmproj-offload); empty: `device`
  std::string media_path;            // the folder file:// image URLs are read from (--media-path);
                                     // empty: file:// URLs are refused
  // The memory image decodes in flight may take together (a MemoryGate, 16 bytes a pixel); an
  // image that does not fit beside them is answered 503. The default holds two of the largest
  // images ImageLimits allows.
  size_t image_decode_bytes = size_t{2} << 30;
  std::string pooling;               // none|mean|cls|last; empty: the model's, else mean (--pooling)
  // Speculative decoding (--spec-type, --spec-*; no sources: off). draft_model: the draft-simple
  // model's file (-md), loaded with the model.
  SpeculativeOptions speculative;
  std::string draft_model;
  DraftPlacementFlags draft_placement;  // the draft model's -devd, -ngld, -otd (model_placement.h)
  int32_t sleep_idle_seconds = 0;    // > 0: evict the model's memory after this many idle seconds
  // Many models (model_router.h): non-empty, the server serves these by the request's "model"
  // (attach_models()), and `device`, `budgets` and the fields above are every model's defaults.
  std::vector<ModelSpec> models;
  int32_t models_max = 4;                  // models loaded at once; 0: no limit
  bool models_autoload = true;             // a request for an unloaded model loads it
  // A request waits this long for room (other models' requests to end) and for the --arbiter
  // token together, then 503.
  int32_t residency_timeout_seconds = 30;
  // Chat defaults (llama-server's flags); a request's own fields win (see chat_request.h).
  std::string reasoning_format = "auto";  // --reasoning-format: none|auto|deepseek|deepseek-legacy
  std::optional<bool> enable_thinking;    // -rea on|off; nullopt (auto): the template's default
  int32_t reasoning_budget = -1;          // --reasoning-budget: tokens per reasoning block; -1: no cap
  std::string reasoning_budget_message;   // --reasoning-budget-message: written before the forced end tag
  std::string chat_template_kwargs;       // --chat-template-kwargs: a JSON object's text; empty: none
  // The output constraint of requests that set none (--grammar/--grammar-file: GBNF;
  // --json-schema/--json-schema-file: a JSON schema's text); at most one is set.
  std::string grammar, json_schema;
  // HTTP (see http/http_server.h). A request's body must arrive, and a client take an answer's
  // bytes, within timeout_seconds (--timeout); headers within head_timeout_ms.
  int32_t timeout_seconds = 3600;
  int32_t head_timeout_ms = 10'000;
  size_t max_body = size_t{16} << 20;  // bytes (--max-body); larger bodies get 413 unread
  // The memory requests' work before the queue (parsing the body, rendering the chat, tokenizing)
  // may take together: each such request holds kPrequeueBytesPerBodyByte per byte of its body
  // while it works, and one that does not fit beside the others is answered 503 (retry). The
  // default lets two bodies of the largest default size (16 MiB) work at once, and a hundred of
  // 300 KB.
  size_t prequeue_bytes = size_t{2} << 30;
  // How many requests may work before the queue at once (0: twice the hardware threads, at least
  // 4): CPU work that many handler threads would otherwise share. One more waits up to
  // kPrequeueHoldWait for a turn, then is answered 503 (retry).
  size_t prequeue_jobs = 0;
  // The work one token's grammar may take (grammar::WorkBudget units, about a nanosecond each);
  // past it the request fails with a 400 naming the limit.
  uint64_t grammar_work_limit = grammar::WorkBudget::kDefaultLimit;
  bool reuse_port = false;             // --reuse-port: let other sockets bind this port too
  std::string cors_origins = "*";      // --cors-origins: "*", a list, or empty (no CORS)
  // Lifecycle events for the operator ("sleeping: ...", "awake: ..."), from any thread; empty:
  // quiet.
  std::function<void(const std::string&)> log;
};

// The engine's slots and pool for `opt`, resolved as llama-server resolves -np, -kvu/-no-kvu
// and --kv-unified-per-slot.
EngineOptions engine_options(const ServerOptions& opt);
// The KV cells of a server's context for `opt` and a model of `hparams` (ContextOptions::n_ctx
// resolved, --kv-unified-per-slot's pool included).
int64_t server_context_size(const ServerOptions& opt, const HParams& hparams);

// A use of `arbiter`'s token for a request that may wait for it until `deadline`; an empty use
// without an arbiter; an Error naming the device and --residency-timeout when the deadline passes.
Result<Arbiter::Use> use_device(Arbiter* arbiter, const ServerOptions& options,
                                std::chrono::steady_clock::time_point deadline);

// What a request's work before the queue may take per byte of its body (ServerOptions::
// prequeue_bytes): measured, a chat body of short words took 58 bytes a byte to tokenize.
inline constexpr size_t kPrequeueBytesPerBodyByte = 64;
// How long a request waits for a turn at pre-queue work (ServerOptions::prequeue_jobs).
inline constexpr std::chrono::milliseconds kPrequeueHoldWait{10'000};
// ServerOptions::prequeue_jobs, its 0 resolved.
size_t prequeue_jobs(const ServerOptions& options);

class Server {
 public:
  explicit Server(ServerOptions options);
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // Binds host:port (0: any free port) and serves on a background thread; the bound port.
  Result<int> listen(const std::string& host, int port);
  // Makes the server ready: builds the chat template, the context and the engine over `model`.
  Status attach(std::shared_ptr<const Model> model);
  // Makes a server of many models (options.models) ready: one device registry for all of them
  // (so they share the --max-mem budgets), each model loaded on its first request (or now, with
  // load_on_startup; the first such error is returned). Routes pick the model by the request's
  // "model": text models through the ModelRouter (model_router.h), image models (classify_models
  // tells them apart) through ImageModels (image_models.h).
  Status attach_models();
  // The text models of a server of many models; null for one model.
  ModelRouter* router() const { return router_view_.load(std::memory_order_acquire); }
  // The image models of a server of many models (ModelKind::Image); null when it has none.
  ImageModels* images() const { return images_view_.load(std::memory_order_acquire); }
  // Cancels in-flight generations, stops accepting, joins the HTTP thread. A sleeping server has
  // nothing to cancel; a reload in progress finishes first (its state is then dropped).
  // Idempotent.
  void stop();

  // For a request that needs the model: the state, woken from sleep if needed (its memory comes
  // back with its first pass). The request counts as activity until the returned pointer and all
  // its copies are gone: a streaming response keeps a copy until its stream ends. Errors: the
  // model still loads, the server stops. The pointer must not outlive the Server.
  Result<std::shared_ptr<ServerState>> acquire();
  // The state once attached (asleep too); null while the model first loads. Never wakes the
  // server and is not activity.
  std::shared_ptr<ServerState> peek() const;
  // What the server knows of its model; null before the first attach.
  std::shared_ptr<const ModelInfo> info() const;
  // The model's memory was evicted for idleness and no request needed it since.
  bool sleeping() const;
  // With --arbiter (after attach): the arbiter; else null.
  const Arbiter* arbiter() const { return arbiter_.get(); }
  // The memory of requests' work before the queue (ServerOptions::prequeue_bytes).
  MemoryGate& prequeue_memory() { return prequeue_memory_; }

 private:
  using Clock = std::chrono::steady_clock;
  class Lease;
  void routes(http::Router& router);
  std::shared_ptr<ServerState> lease(std::shared_ptr<ServerState> st, Arbiter::Use use);  // under mutex_
  // A use of the arbiter's token (an empty one without --arbiter); an Error after the timeout.
  Result<Arbiter::Use> use_device();
  // Opens the arbiter with --arbiter (once), `yield` its hook.
  Status open_arbiter(Arbiter::YieldHook yield);
  // The one-model server's yield hook: evicts the model's residents from its device when the
  // engine is idle (false when it generates).
  Result<bool> yield_device();
  void end_activity();
  void sleeper();
  void log(const std::string& message) const;

  ServerOptions opt_;
  MemoryGate prequeue_memory_{opt_.prequeue_bytes, prequeue_jobs(opt_)};
  std::unique_ptr<Arbiter> arbiter_;        // with opt_.arbiter_dir, from the first attach()
  std::unique_ptr<ModelRouter> router_;     // from attach_models(); outlives http_'s requests
  // router_ as handler threads see it: published once attach_models() made it (the handlers run
  // from listen() on, before it).
  std::atomic<ModelRouter*> router_view_{nullptr};
  std::unique_ptr<ImageModels> images_;  // from attach_models() when it has image models
  std::atomic<ImageModels*> images_view_{nullptr};  // images_ as handler threads see it
  std::unique_ptr<http::HttpServer> http_;  // from listen()
  mutable std::mutex mutex_;
  std::condition_variable cv_;             // state_, active_, asleep_, stopping_ changed
  std::shared_ptr<ServerState> state_;     // null until attached
  std::shared_ptr<const ModelInfo> info_;  // null until attached
  int64_t active_ = 0;                     // leases alive
  Clock::time_point last_activity_;        // when active_ last dropped to 0
  bool asleep_ = false;                    // evicted for idleness, no request since
  bool stopping_ = false;
  std::thread sleeper_;
};

}  // namespace kiln::serve
