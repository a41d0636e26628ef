// `kiln serve`: the OpenAI-compatible HTTP server (src/serve/server.h).
//   kiln serve [-m MODEL.gguf] [--host 127.0.0.1] [--port 8080] [--parallel N] [--api-key K]
//              [--chat-template-file F] [--sleep-idle-seconds N] [model flags]
// It listens first (GET /health answers 503 while the model loads), then serves until SIGINT or
// SIGTERM: in-flight generations are cancelled and it exits 0 (at once when asleep; a reload in
// progress finishes first). With --sleep-idle-seconds the model is released when idle and loaded
// again, from the same file with the same flags, by the next request that needs it.
#include <pthread.h>

#include <csignal>
#include <cstdio>

#include "command.h"
#include "default_model.h"
#include "llm/embeddings.h"
#include "messages.h"
#include "model_flags.h"
#include "serve/server.h"
#include "serve/server_state.h"
#include "user_files.h"

namespace kiln::cli {
namespace {

int run_serve(int argc, char** argv) {
  ModelFlags mf;
  std::string host = "127.0.0.1", api_key, template_file, pooling;
  int32_t port = 8080, parallel = 4, queue = 64, sleep_idle = 0;
  bool embeddings = false;
  OptionParser p("serve", "kiln serve [-m MODEL.gguf] [--host H] [--port P] [--parallel N] [options]");
  mf.declare(p);
  p.value({"--host"}, &host, "HOST", "address to listen on (default 127.0.0.1)");
  p.value({"--port"}, &port, "PORT", "port to listen on, 1..65535 (default 8080; 0: any free port)",
          IntRange::between(0, 65535));
  p.value({"-np", "--parallel"}, &parallel, "N",
          "slots: requests generated at once (default 4); they share the context",
          IntRange::between(1, kMaxSequences));
  p.value({"--queue"}, &queue, "N", "requests that may wait for a slot before 503 (default 64)",
          IntRange::at_least(0));
  p.value({"--api-key"}, &api_key, "KEY", "require 'Authorization: Bearer KEY' (all routes but /health)");
  p.value({"--chat-template-file"}, &template_file, "FILE",
          "Jinja chat template to use instead of the model's");
  p.flag({"--embeddings"}, &embeddings, "serve POST /v1/embeddings and /embeddings");
  p.value({"--pooling"}, &pooling, "none|mean|cls|last",
          "embedding pooling (default: the model's, else mean)");
  p.value({"--sleep-idle-seconds"}, &sleep_idle, "N",
          "release the model after N idle seconds; reload on the next request (0 or -1: never)",
          IntRange::at_least(-1));
  if (auto code = p.parse(argc, argv)) return *code;
  if (auto code = mf.list_devices_if_asked("serve")) return *code;
  if (!pooling.empty()) {
    if (auto pp = parse_pooling(pooling); !pp.ok())
      return fail("serve", "--pooling: " + pp.error().message, 2);
  }

  serve::ServerOptions opt;
  opt.n_parallel = parallel;
  opt.queue_limit = queue;
  opt.api_key = api_key;
  opt.n_threads = mf.threads;
  opt.device = mf.device;
  opt.sim_devices = mf.device_options().sim;
  opt.context = mf.context;
  opt.embeddings = embeddings;
  opt.pooling = pooling;
  opt.sleep_idle_seconds = sleep_idle;
  opt.log = [](const std::string& message) { std::fprintf(stderr, "kiln serve: %s\n", message.c_str()); };
  if (!template_file.empty()) {
    auto text = read_text_file(template_file);
    if (!text.ok()) return fail("serve", "--chat-template-file: " + text.error().message);
    opt.chat_template_source = std::move(*text);
  }

  // SIGINT/SIGTERM are taken by sigwait() on this thread; every other thread blocks them.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  serve::Server server(opt);
  auto bound = server.listen(host, port);
  if (!bound.ok()) return fail("serve", bound.error().message);
  std::fprintf(stderr, "kiln serve: listening on http://%s:%d (loading the model)\n", host.c_str(), *bound);
  // The same file every time the server wakes (the embedded model when no -m was given).
  // The first load warns when a slot's context exceeds the model's training context.
  const std::string model_path = mf.model_path;
  serve::ModelLoader loader = [model_path, &opt,
                               warned = false]() mutable -> Result<std::shared_ptr<const Model>> {
    auto model = model_path.empty() ? load_default_model() : Model::load(model_path);
    if (model.ok() && !warned) {  // the first call is attach()'s, on this thread
      warned = true;
      warn_beyond_training_context("serve", context_size(opt.context, (*model)->hparams()) / opt.n_parallel,
                                   **model);
    }
    return model;
  };
  if (const Status st = server.attach(std::move(loader)); !st.ok()) return fail("serve", st.error().message);
  const std::string sleeps =
      sleep_idle > 0 ? ", sleeping after " + std::to_string(sleep_idle) + " s idle" : "";
  std::fprintf(stderr, "kiln serve: ready: %s, %d slots%s\n", server.info()->name.c_str(), parallel,
               sleeps.c_str());
  int sig = 0;
  sigwait(&signals, &sig);
  std::fprintf(stderr, "kiln serve: %s, shutting down\n", sig == SIGINT ? "SIGINT" : "SIGTERM");
  server.stop();
  return 0;
}

}  // namespace

KILN_COMMAND(serve, "OpenAI-compatible HTTP server (/v1/completions, /v1/chat/completions, ...)", run_serve);

}  // namespace kiln::cli
