// What the route handlers share: the server's options and, once a model is attached, the model
// with its chat template, context and engine. Route files (routes_*.cpp) register handlers on the
// HTTP server through the add_*_routes functions below.
// Thread-safety: a ServerState is immutable once published (the Engine inside is thread-safe);
// handlers hold a shared_ptr to it for the length of a request.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "llm/context.h"
#include "llm/cpu_engine.h"
#include "llm/model.h"
#include "serve/engine.h"
#include "serve/server.h"
#include "text/chat_template.h"

namespace httplib {
class Server;
}

namespace kiln::serve {

struct ServerState {
  std::shared_ptr<const Model> model;
  std::optional<ChatTemplate> chat_template;
  std::string bos_text, eos_text;  // the vocabulary's BOS/EOS texts, for templates
  std::unique_ptr<CpuEngine> cpu;
  std::unique_ptr<Context> ctx;
  std::unique_ptr<Engine> engine;
  ~ServerState() {
    if (engine) engine->stop();  // before the context it decodes with goes away
  }
};

struct RouteContext {
  const ServerOptions& options;
  // The attached state, or null while the model loads.
  std::function<std::shared_ptr<ServerState>()> ready;
};

// GET /v1/models, /slots. (/health and /v1/health are the server's own: server.cpp.)
void add_info_routes(httplib::Server& http, const RouteContext& rc);
// POST /tokenize, /detokenize.
void add_token_routes(httplib::Server& http, const RouteContext& rc);
// POST /v1/completions, /completions, /v1/chat/completions, /chat/completions.
void add_completion_routes(httplib::Server& http, const RouteContext& rc);
// POST /v1/embeddings, /embeddings (only with options.embeddings).
void add_embedding_routes(httplib::Server& http, const RouteContext& rc);

}  // namespace kiln::serve
