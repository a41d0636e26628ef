// Server: kiln's OpenAI-compatible HTTP server (llama-server's routes). The routes live in
// routes_*.cpp (see server_state.h for the list):
//   GET  /health, /v1/health    503 while the model first loads, then 200 {"status": "ok"}
//                               (asleep: {"status": "ok", "sleeping": true})
//   GET  /props                 llama-server's server properties (is_sleeping included)
//   GET  /v1/models, /slots
//   GET  /metrics               Prometheus text (llama-server's metric names, plus memory gauges)
//   GET  /v1/memory             the memory breakdown per device and model (JSON)
//   POST /v1/completions, /v1/chat/completions   (stream false, or SSE chunks then [DONE])
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
// Idle sleep (options.sleep_idle_seconds > 0, a server attached with a ModelLoader): after that
// many seconds with no request holding the state (see acquire()) and no generation in the engine,
// the state is released: engine, context (KV cache, compute arena), the model's weights on its
// device, the devices with their thread pool (a sim device with its pool) and the model (its file
// unmapped, unless someone else still holds the Model), then free heap memory is given
// back to the OS. The next request that needs the model (acquire()) reloads it through the same
// loader with the same options; requests arriving meanwhile wait for that reload. A reload that
// fails answers those requests with its error (503) and the next request tries again. Routes that
// only look (health, /props, /v1/models, /slots, /metrics) use peek()/info(): they never wake it
// and are not activity.
//
// Arbiter (options.arbiter_dir): the model's device is shared with other processes by a token
// (runtime/arbiter.h). attach() and every acquire() first take a use of the token (waiting up to
// arbiter_timeout_seconds; the request's lease keeps it), so the model is loaded, woken and
// restored only while this process holds it. When another process waits and no lease is alive,
// the arbiter's monitor thread yields: it evicts every owner's residents from the device (the
// next request's decode restores them, bit-exact) and releases the token.
//
// Thread-safety: listen/attach/stop from one controlling thread; acquire/peek/info/sleeping from
// any thread (handlers run on the HTTP layer's worker threads).
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "backends/device_registry.h"
#include "backends/sim/sim_device.h"
#include "core/result.h"
#include "llm/context.h"
#include "llm/model.h"
#include "llm/speculative/options.h"
#include "runtime/arbiter.h"

namespace kiln::serve {

namespace http {
class HttpServer;
class Router;
}  // namespace http
struct ServerState;
struct ModelInfo;

struct ServerOptions {
  int32_t n_parallel = 4;            // slots
  int32_t queue_limit = 64;          // requests waiting for a slot before 503
  std::string api_key;               // empty: no authentication
  std::string chat_template_source;  // empty: the model's tokenizer.chat_template, else ChatML
  int32_t n_threads = 0;             // compute threads; 0: every hardware thread
  std::string device = "cpu";        // the device the model runs on (a DeviceRegistry name)
  std::vector<SimDeviceOptions> sim_devices;  // sim devices to create (--sim-capacity)
  std::vector<DeviceBudget> budgets;          // residency budgets per device (--max-mem)
  std::string sim_shared_dir;  // --sim-shared: sim capacity shared with other processes (SimLedger)
  // --arbiter DIR: take turns on `device` with other processes by the token in DIR
  // (runtime/arbiter.h); a request waits at most arbiter_timeout_seconds for it, then 503.
  std::string arbiter_dir;
  int32_t arbiter_timeout_seconds = 30;
  ContextOptions context;            // n_ctx is shared by the slots
  bool embeddings = false;           // serve POST /v1/embeddings (--embeddings)
  std::string mmproj;                // the model's vision projector (--mmproj); empty: text only.
  std::string media_path;            // the folder file:// image URLs are read from (--media-path);
                                     // empty: file:// URLs are refused
                                     // Loaded with the model, released with it when asleep.
  std::string pooling;               // none|mean|cls|last; empty: the model's, else mean (--pooling)
  // Speculative decoding (--spec-type, --spec-*; no sources: off). draft_model: the draft-simple
  // model's file (-md), loaded with the model (and again at every wake from sleep).
  SpeculativeOptions speculative;
  std::string draft_model;
  int32_t sleep_idle_seconds = 0;    // > 0: release the model after this many idle seconds
  // HTTP (see http/http_server.h). A request's body must arrive, and a client take an answer's
  // bytes, within timeout_seconds (--timeout); headers within head_timeout_ms.
  int32_t timeout_seconds = 3600;
  int32_t head_timeout_ms = 10'000;
  size_t max_body = size_t{16} << 20;  // bytes (--max-body); larger bodies get 413 unread
  bool reuse_port = false;             // --reuse-port: let other sockets bind this port too
  std::string cors_origins = "*";      // --cors-origins: "*", a list, or empty (no CORS)
  // Lifecycle events for the operator ("sleeping: ...", "awake: ..."), from any thread; empty:
  // quiet.
  std::function<void(const std::string&)> log;
};

// Loads the model a server serves; called once by attach() and again at every wake from sleep.
// Called from a request thread while others wait; must be callable from any thread.
using ModelLoader = std::function<Result<std::shared_ptr<const Model>>()>;

class Server {
 public:
  explicit Server(ServerOptions options);
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // Binds host:port (0: any free port) and serves on a background thread; the bound port.
  Result<int> listen(const std::string& host, int port);
  // Makes the server ready: loads the model through `loader` now, builds the chat template, the
  // context and the engine; with sleep_idle_seconds > 0 the server may release them when idle and
  // reload through `loader` on demand.
  Status attach(ModelLoader loader);
  // The same for a model already loaded. There is nothing to reload it from, so such a server
  // never sleeps (sleep_idle_seconds is ignored).
  Status attach(std::shared_ptr<const Model> model);
  // Cancels in-flight generations, stops accepting, joins the HTTP thread. A sleeping server has
  // nothing to cancel; a reload in progress finishes first (its state is then dropped).
  // Idempotent.
  void stop();

  // For a request that needs the model: the state, woken from sleep if needed (waiting for a
  // reload another request started). The request counts as activity until the returned pointer
  // and all its copies are gone: a streaming response keeps a copy until its stream ends. Errors:
  // the model still loads, the reload failed (its message), the server stops. The pointer must
  // not outlive the Server.
  Result<std::shared_ptr<ServerState>> acquire();
  // The state if the model is loaded now; null while asleep or loading. Never wakes the server
  // and is not activity (holding it delays freeing the memory, not sleep).
  std::shared_ptr<ServerState> peek() const;
  // What the server knows of its model, kept through sleep; null before the first attach.
  std::shared_ptr<const ModelInfo> info() const;
  // The model was released for idleness and not reloaded yet.
  bool sleeping() const;
  // With --arbiter (after attach): the arbiter; else null.
  const Arbiter* arbiter() const { return arbiter_.get(); }

 private:
  using Clock = std::chrono::steady_clock;
  class Lease;
  void routes(http::Router& router);
  Status install(std::shared_ptr<const Model> model, ModelLoader loader);
  std::shared_ptr<ServerState> lease(std::shared_ptr<ServerState> st, Arbiter::Use use);  // under mutex_
  // A use of the arbiter's token (an empty one without --arbiter); an Error after the timeout.
  Result<Arbiter::Use> use_device();
  // The arbiter's yield hook: evicts the model's residents from its device when the engine is idle.
  Result<bool> yield_device();
  void end_activity();
  void sleeper();
  void log(const std::string& message) const;

  ServerOptions opt_;
  std::unique_ptr<Arbiter> arbiter_;        // with opt_.arbiter_dir, from the first attach()
  std::unique_ptr<http::HttpServer> http_;  // from listen()
  mutable std::mutex mutex_;
  std::condition_variable cv_;             // state_, active_, waking_, stopping_ changed
  std::shared_ptr<ServerState> state_;     // null until attached, and while asleep
  std::shared_ptr<const ModelInfo> info_;  // null until attached
  ModelLoader loader_;                     // empty: attached without one (never sleeps)
  int64_t active_ = 0;                     // leases alive
  Clock::time_point last_activity_;        // when active_ last dropped to 0
  bool releasing_ = false;                 // the sleeper is freeing the state (state_ already null)
  bool asleep_ = false;                    // released, not reloaded yet
  bool waking_ = false;                    // a request is reloading the model
  uint64_t wake_attempts_ = 0;             // reloads finished (ok or not)
  std::string wake_error_;                 // the last reload's error; empty: it worked
  bool stopping_ = false;
  std::thread sleeper_;
};

}  // namespace kiln::serve
