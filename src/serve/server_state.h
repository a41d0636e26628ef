// What the route handlers share: the server's options and, once a model is attached, the model
// with its chat template, devices, weights, context and engine (ServerState), plus what is known
// of the model even while the server sleeps (ModelInfo). Route files (routes_*.cpp) register
// their handlers on the server's http::Router through the add_*_routes functions below.
// Thread-safety: a ServerState and a ModelInfo are immutable once published (the Engine inside is
// thread-safe); handlers hold a shared_ptr to the state for the length of a request.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "backends/device_registry.h"
#include "llm/context.h"
#include "llm/device_weights.h"
#include "llm/model.h"
#include "llm/speculative/speculator.h"
#include "llm/audio_encoder.h"
#include "llm/vision_encoder.h"
#include "llm/vision_model.h"
#include "serve/api_json.h"
#include "serve/engine.h"
#include "serve/http/router.h"
#include "serve/memory_gate.h"
#include "serve/server.h"
#include "text/chat/chat_syntax.h"
#include "text/chat_template.h"

namespace kiln::serve {

struct ServerState {
  std::shared_ptr<const Model> model;
  std::string name;  // what answers call the model: Model::name(), or its name in a server of many
  std::optional<ChatTemplate> chat_template;
  std::string chat_template_source;  // the Jinja source of chat_template
  chat::ChatSyntax chat_syntax;      // how its assistant turns write reasoning and tool calls
  std::string bos_text, eos_text;    // the vocabulary's BOS/EOS texts, for templates
  // The thread pool and devices; options.device computes, in the device's compute arena
  // (DeviceRegistry::arena: the context, the vision encoder, the draft model and the embedder take
  // turns in it). A server of many models shares one registry (one residency manager and one
  // arena per device) between the models' states.
  std::shared_ptr<DeviceRegistry> devices;
  // Per device of `placed`: a backend of its own when the registry is shared (models' engines
  // compute at the same time, each with its own kernel scratch); empty: the registry's backends.
  std::vector<std::unique_ptr<Backend>> backends;
  std::shared_ptr<DeviceWeights> weights;   // the model on its main device, shared with the embedder
  // Every device's weights (-ngl, -ts, -ot, --fit: llm/model_placement.h), `weights` first; one
  // entry when the model lies whole on its device.
  std::vector<std::shared_ptr<DeviceWeights>> placed;
  std::shared_ptr<const VisionModel> vision;  // the mmproj (options.mmproj); null without one
  std::unique_ptr<Context> ctx;
  std::unique_ptr<VisionEncoder> encoder;  // with `vision`: encodes request images (any thread)
  // The mmproj's audio encoder (a file with clip.has_audio_encoder); null without one. As the vision
  // encoder: an owner of its own on the model's device, computing in the device's arena.
  std::shared_ptr<const AudioModel> audio;
  std::unique_ptr<AudioEncoder> audio_encoder;
  std::string media_path;                  // ServerOptions::media_path
  size_t max_media_bytes = 0;              // a media file's size limit: ServerOptions::max_body
  // With `vision`: the memory the model's image decodes in flight take (ServerOptions::image_decode_bytes).
  std::unique_ptr<MemoryGate> decode_memory;
  // With options.speculative: the draft sources and the draft model's context (a second owner of
  // the device's memory, in the same compute arena); driven by the engine thread only.
  std::unique_ptr<Speculator> speculator;
  std::unique_ptr<Engine> engine;
  ~ServerState() {
    if (engine) engine->stop();  // before the context it decodes with goes away
  }
};

// The model as the server knows it between loads: filled at attach, unchanged by sleep (a reload
// uses the same file and options).
struct ModelInfo {
  std::string name;  // Model::name()
  std::string path;  // Model::path()
  std::string chat_template_source;
  std::string bos_text, eos_text;
  int64_t n_ctx = 0;  // KV cells, shared by the slots
  int32_t n_slots = 0;
  int32_t n_ctx_slot = 0;      // tokens one slot may hold
  bool vision = false;         // an mmproj is loaded: requests may carry images
  bool audio = false;          // the mmproj has an audio encoder: requests may carry audio
  GenerationRequest defaults;  // a completion request with no fields set (prompt empty)
  bool stream_default = false;
};

// The devices of a server's models: the options' sim devices, budgets, shared sim ledger and swap
// directory (a registry shared by the models of a server of many, or one model's own).
DeviceRegistryOptions registry_options(const ServerOptions& opt);

// The model's state as the routes use it: chat template, context and engine over `model`, on
// `devices` (null: a registry of its own from the options' devices and budgets).
Result<std::shared_ptr<ServerState>> build_state(const ServerOptions& opt, std::shared_ptr<const Model> model,
                                                 std::shared_ptr<DeviceRegistry> devices);
// What the routes keep of a built state (ModelInfo), for a server of `n_slots` slots.
std::shared_ptr<const ModelInfo> describe(const ServerState& st);

// No generation holds a slot of `st`'s engine or waits for one (a stream keeps generating after
// its handler returned). Any thread.
bool engine_idle(const ServerState& st);

// Idle sleep: evicts what `st` holds on its device through the residency manager, the model's
// weights and KV cache (a host device's KV cache only with --swap-dir, else it stays), the
// draft model's and the vision and audio encoders' (their weights and inputs), then the device's compute
// arena, and frees their contexts' host output buffers (the engine must be idle: the last
// decode's outputs are gone). The state itself stays, so the slots keep their token history: the
// next pass that pins an owner restores its memory bit for bit and a returning conversation
// reuses its prompt cache. An owner pinned now (a pass in progress; for the arena, another
// model's request) stays resident and is the Error. Any thread.
Status evict_memory(ServerState& st);

struct RouteContext {
  const ServerOptions& options;
  Server& server;

  // For a request that needs the model: wakes a sleeping server (see Server::acquire); with many
  // models, the one the body's "model" names, loaded and pinned for the request (ModelRouter::
  // acquire). Null after answering the error (503 while the model first loads, when a reload
  // failed or the server stops; 400 without "model", 404 for an unknown one). Holding the pointer
  // keeps the server awake and the model resident.
  std::shared_ptr<ServerState> ready(http::Exchange& ex, const json& body) const;
  // For a request about to work before the queue (parsing, rendering, tokenizing): its hold on
  // the server's pre-queue memory (ServerOptions::prequeue_bytes), kPrequeueBytesPerBodyByte per
  // byte of its body; drop it once the request is queued. Null after answering 503 (other
  // requests hold that memory now: retry) or 413 (the body alone would need more than all of it).
  std::optional<MemoryGate::Lease> admit(const http::Request& req, http::Exchange& ex) const;

  // What routes that only look (/props, /slots, /metrics) see of the model; with many models,
  // the one the query's "model" names (?model=NAME). Never wakes or loads it.
  struct Look {
    std::shared_ptr<const ModelInfo> info;  // known through sleep (name, path, template, sizes)
    std::shared_ptr<ServerState> st;        // the state if loaded now (asleep too), else null
    bool sleeping = false;                  // its memory evicted for idleness (or, many, by LRU)
    // The slots now; unloaded, every slot is idle with nothing cached.
    std::vector<SlotInfo> slots() const;
  };
  // Null after answering the error (503 before the model first loaded; with many models 400
  // without ?model=, 404 for an unknown one).
  std::optional<Look> look(const http::Request& req, http::Exchange& ex) const;
  // The devices the server's models run on (with many models, the registry they all share); null
  // while the one model is asleep or loading. Never wakes or loads anything.
  std::shared_ptr<DeviceRegistry> devices() const;
};

// GET /v1/models and /models with many models: every model and its status; POST /models/load,
// /models/unload.
void add_model_routes(http::Router& router, const RouteContext& rc);

// GET /slots, /metrics, /v1/memory. (/health, /v1/health and /props are the server's own.)
void add_info_routes(http::Router& router, const RouteContext& rc);
// POST /tokenize, /detokenize, /apply-template.
void add_token_routes(http::Router& router, const RouteContext& rc);
// POST /v1/completions, /completions, /v1/chat/completions, /chat/completions, /completion.
void add_completion_routes(http::Router& router, const RouteContext& rc);
// POST /v1/embeddings, /embeddings, /embedding (501 without options.embeddings).
void add_embedding_routes(http::Router& router, const RouteContext& rc);

}  // namespace kiln::serve
