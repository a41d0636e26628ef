// Server: kiln's OpenAI-compatible HTTP server (llama-server's routes). The routes live in
// routes_*.cpp (see server_state.h for the list):
//   GET  /health, /v1/health    503 while the model loads, then 200 {"status": "ok"}
//   GET  /v1/models, /slots
//   POST /v1/completions, /v1/chat/completions   (stream false, or SSE chunks then [DONE])
//   POST /tokenize, /detokenize                  (llama-server's shapes)
// Errors use OpenAI's shape {"error": {"message", "type", "code"}}. With --api-key every route
// but the health checks wants "Authorization: Bearer KEY".
//
// Lifecycle: listen() (port 0 picks a free one) starts the HTTP threads; attach() gives it the
// loaded model; stop() cancels every generation and stops listening. A client that disconnects
// from a stream cancels its generation (noticed at the next piece). A non-streaming request runs
// to its end even if its client has gone.
// Thread-safety: listen/attach/stop from one controlling thread; handlers run on HTTP threads.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "core/result.h"
#include "llm/context.h"
#include "llm/cpu_engine.h"
#include "llm/model.h"
#include "text/chat_template.h"

namespace httplib {
class Server;
}

namespace kiln::serve {

struct ServerState;

struct ServerOptions {
  int32_t n_parallel = 4;             // slots
  int32_t queue_limit = 64;           // requests waiting for a slot before 503
  std::string api_key;                // empty: no authentication
  std::string chat_template_source;   // empty: the model's tokenizer.chat_template, else ChatML
  int32_t n_threads = 0;              // compute threads; 0: every hardware thread
  ContextOptions context;             // n_ctx is shared by the slots
  bool embeddings = false;            // serve POST /v1/embeddings (--embeddings)
  std::string pooling;                // none|mean|cls|last; empty: the model's, else mean (--pooling)
  int32_t sleep_idle_seconds = 0;     // > 0: release the model after this many idle seconds
};

class Server {
 public:
  explicit Server(ServerOptions options);
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // Binds host:port (0: any free port) and serves on a background thread; the bound port.
  Result<int> listen(const std::string& host, int port);
  // Makes the server ready with `model`: builds the chat template, the context and the engine.
  Status attach(std::shared_ptr<const Model> model);
  // Cancels in-flight generations, stops accepting, joins the HTTP thread. Idempotent.
  void stop();

 private:
  void routes();
  std::shared_ptr<ServerState> ready() const;

  ServerOptions opt_;
  std::unique_ptr<httplib::Server> http_;
  std::thread thread_;
  mutable std::mutex mutex_;
  std::shared_ptr<ServerState> state_;  // null until attached
};

}  // namespace kiln::serve
