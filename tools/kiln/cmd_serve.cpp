// `kiln serve`: the OpenAI-compatible HTTP server (src/serve/server.h).
//   kiln serve [-m MODEL.gguf] [--host 127.0.0.1] [--port 8080] [--parallel N] [--api-key K]
//              [--chat-template-file F] [--sleep-idle-seconds N] [--mmproj MMPROJ.gguf] [--timeout S]
//              [--max-body N] [--reuse-port] [--cors-origins LIST] [--media-path DIR] [model flags]
//              [--spec-type TYPES] [-md DRAFT.gguf] ...   (speculative decoding: same output, faster)
// It raises its open-file limit to the hard limit (every connection is a descriptor), listens
// (GET /health answers 503 while the model loads; a port in use is an error), then serves until
// SIGINT or SIGTERM: in-flight generations are cancelled, their clients answered, and it exits 0
// (at once when asleep; a reload in progress finishes first). Whatever the clients do it exits
// within kStopLimit; a second signal ends it at once (exit 1).
// With --sleep-idle-seconds the model is released when idle and loaded again, from the same file
// with the same flags, by the next request that needs it.
// Many models (-m NAME=PATH repeated, --models-dir, --models-preset; serve/model_router.h): each
// request's "model" picks one; models load on first use and share the --max-mem budgets, evicting
// each other (LRU) and coming back with their slots' prompt caches. --sleep-idle-seconds is then
// every model's idle eviction (a preset's sleep-idle-seconds replaces it per model). A Stable
// Diffusion checkpoint among them (-m NAME=CKPT.safetensors, or a preset's diffusion-model, clip_l,
// vae, taesd keys) is an image model (serve/image_models.h), served by the image routes.
#include <pthread.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <nlohmann/json.hpp>
#include <optional>
#include <thread>

#include "command.h"
#include "default_model.h"
#include "llm/embeddings.h"
#include "media_flags.h"
#include "messages.h"
#include "model_flags.h"
#include "reasoning_flags.h"
#include "sampler_flags.h"
#include "serve/model_catalog.h"
#include "serve/server.h"
#include "serve/server_state.h"
#include "speculative_flags.h"
#include "text/chat/output_parser.h"
#include "user_files.h"

namespace kiln::cli {
namespace {

// The longest a shutdown may take (a model load or a long tokenization still running) before
// the process ends without waiting for it.
constexpr auto kStopLimit = std::chrono::seconds(4);

// Every connection holds a descriptor: the soft limit (often 1024) goes up to the hard limit.
void raise_open_file_limit() {
  rlimit lim{};
  if (getrlimit(RLIMIT_NOFILE, &lim) != 0 || lim.rlim_cur >= lim.rlim_max) return;
  const rlim_t was = lim.rlim_cur;
  lim.rlim_cur = lim.rlim_max;
  if (setrlimit(RLIMIT_NOFILE, &lim) != 0)
    print_warning("serve", "cannot raise the open-file limit from " + std::to_string(was) + ": " +
                               std::strerror(errno));
}

// "16M", "512k", "1G" or plain bytes; 0 on a malformed or non-positive size.
size_t parse_size(const std::string& text) {
  size_t used = 0;
  unsigned long long n = 0;
  try {
    n = std::stoull(text, &used);
  } catch (...) {
    return 0;
  }
  const std::string suffix = text.substr(used);
  unsigned shift = 0;
  if (suffix == "k" || suffix == "K")
    shift = 10;
  else if (suffix == "m" || suffix == "M")
    shift = 20;
  else if (suffix == "g" || suffix == "G")
    shift = 30;
  else if (!suffix.empty())
    return 0;
  if (n == 0 || n > (~0ULL >> shift)) return 0;
  return static_cast<size_t>(n << shift);
}

const char* signal_name(int sig) { return sig == SIGINT ? "SIGINT" : "SIGTERM"; }

int run_serve(int argc, char** argv) {
  ModelFlags mf;
  SpeculativeFlags spf;
  std::string host = "127.0.0.1", api_key, template_file, pooling, mmproj, media_path;
  EncoderDeviceFlags encoder_device;
  int32_t port = 8080, parallel = serve::ServerOptions::kParallelAuto, queue = 64, sleep_idle = 0,
          timeout = 3600;
  int32_t kv_unified_per_slot = 0;
  bool kv_unified = false, no_kv_unified = false;
  std::string arbiter_dir;
  size_t max_body = size_t{16} << 20;
  bool embeddings = false, reuse_port = false;
  std::string cors_origins = "*";
  std::vector<std::string> model_values;
  std::string models_dir, models_preset;
  int32_t models_max = 4, residency_timeout = 30;
  bool models_autoload = true, no_models_autoload = false;
  OptionParser p("serve", "kiln serve [-m MODEL.gguf | -m NAME=PATH ...] [--host H] [--port P] [--parallel N] [options]");
  mf.model_list = &model_values;
  mf.declare(p);
  p.path({"--models-dir"}, &models_dir, "DIR", "serve every DIR/*.gguf, named by its file stem (many models)");
  p.path({"--models-preset"}, &models_preset, "FILE.ini",
          "per-model options in llama-server's preset format (many models; see the README for the keys)");
  p.value({"--models-max"}, &models_max, "N", "models loaded at once (default 4; 0: no limit)",
          IntRange::at_least(0));
  p.flag({"--models-autoload"}, &models_autoload, "a request for an unloaded model loads it (default)");
  p.flag({"--no-models-autoload"}, &no_models_autoload, "models load only through POST /models/load");
  p.value({"--residency-timeout"}, &residency_timeout, "SECONDS",
          "a request waits this long for memory held by other models' requests (and for the --arbiter "
          "token), then 503 (default 30)",
          IntRange::at_least(0));
  p.value({"--host"}, &host, "HOST", "address to listen on (default 127.0.0.1)");
  p.value({"--port"}, &port, "PORT", "port to listen on, 1..65535 (default 8080; 0: any free port)",
          IntRange::between(0, 65535));
  p.value(
      {"-np", "--parallel"}, &parallel, "N",
      "slots: requests generated at once (default -1, auto: 4 slots over one unified KV pool); an explicit N "
      "splits the context between them unless -kvu",
      IntRange::between(1, kMaxSequences).or_also(serve::ServerOptions::kParallelAuto));
  p.flag({"-kvu", "--kv-unified"}, &kv_unified,
         "one KV pool: any slot may use the whole context (default with -np auto); when the pool fills, idle "
         "caches are dropped and the latest requests wait, their cells in host memory");
  p.flag({"-no-kvu", "--no-kv-unified"}, &no_kv_unified, "each slot gets a fixed 1/N of the context");
  p.value({"--kv-unified-per-slot"}, &kv_unified_per_slot, "N",
          "a slot's context is at most N tokens; without -c the pool is sized to slots x N",
          IntRange::at_least(1));
  p.value({"--queue"}, &queue, "N", "requests that may wait for a slot (image jobs: for their turn) before 503 (default 64)",
          IntRange::at_least(0));
  p.value({"--api-key"}, &api_key, "KEY", "require 'Authorization: Bearer KEY' (all routes but /health)");
  p.value({"--chat-template-file"}, &template_file, "FILE",
          "Jinja chat template to use instead of the model's");
  p.value({"--mmproj"}, &mmproj, "FILE",
          "the model's vision encoder and projector (llama.cpp's mmproj GGUF): requests may carry images");
  encoder_device.declare(p);
  p.path({"--media-path"}, &media_path, "DIR",
          "folder whose files image URLs may name as file://PATH (relative to it); default: none");
  p.flag({"--embeddings"}, &embeddings, "serve POST /v1/embeddings and /embeddings");
  p.value({"--pooling"}, &pooling, "none|mean|cls|last",
          "embedding pooling (default: the model's, else mean)");
  p.value({"--sleep-idle-seconds"}, &sleep_idle, "N",
          "release the model after N idle seconds; reload on the next request (0 or -1: never)",
          IntRange::at_least(-1));
  p.value({"-to", "--timeout"}, &timeout, "SECONDS",
          "a request body must arrive, and a client take each part of an answer, within this (default 3600)",
          IntRange::at_least(1));
  p.custom(
      {"--max-body"},
      [&](const std::string& v) {
        max_body = parse_size(v);
        return max_body > 0 ? std::string() : "'" + v + "' is not a size (bytes, or with k, M, G)";
      },
      "BYTES", "largest request body (default 16M); larger ones get 413 without being read");
  p.flag({"--reuse-port"}, &reuse_port, "let other processes listen on the same port (SO_REUSEPORT)");
  p.value({"--cors-origins"}, &cors_origins, "ORIGINS",
          "origins browsers may call from: * (default), a comma-separated list, or '' for none");
  p.path({"--arbiter"}, &arbiter_dir, "DIR",
          "share the device with other kiln serve processes naming DIR: they take turns by a token "
          "(flock on DIR/token.lock, waited for within --residency-timeout); an idle holder evicts its "
          "models when another process waits");
  spf.declare(p);
  std::string reasoning_format = "auto", template_kwargs;
  ReasoningFlags reasoning;
  GrammarFlags output;
  p.value({"--reasoning-format"}, &reasoning_format, "FORMAT",
          "where a chat's reasoning goes: none (left in content), deepseek (reasoning_content), "
          "deepseek-legacy (the same), auto (default: deepseek)");
  reasoning.declare(p);
  p.value({"--chat-template-kwargs"}, &template_kwargs, "JSON",
          "extra chat template variables, a JSON object, e.g. '{\"enable_thinking\": false}' (requests' own win)");
  output.declare(p);
  if (auto code = p.parse(argc, argv)) return *code;
  if (!chat::reasoning_format_from_name(reasoning_format).ok())
    return fail("serve", "--reasoning-format: '" + reasoning_format + "' is not none, auto, deepseek or deepseek-legacy", 2);
  const auto enable_thinking = reasoning.enable_thinking();
  if (!enable_thinking.ok()) return fail("serve", enable_thinking.error().message, 2);
  if (!template_kwargs.empty() && !nlohmann::json::parse(template_kwargs, nullptr, false).is_object())
    return fail("serve", "--chat-template-kwargs: not a JSON object", 2);
  auto constraint = output.read();
  if (!constraint.ok()) return fail("serve", constraint.error().message, 2);
  if (auto code = mf.list_devices_if_asked("serve")) return *code;
  // One model (today's server) unless several are named.
  std::vector<serve::ModelSpec> models;
  const bool many = !models_dir.empty() || !models_preset.empty() || model_values.size() > 1 ||
                    (model_values.size() == 1 && model_values[0].find('=') != std::string::npos);
  if (!many && !model_values.empty()) mf.model_path = model_values[0];
  if (mf.fit_print) {  // the estimate of the one model, with -c's context
    if (many) return fail("serve", "-fitp estimates one model (-m FILE)", 2);
    auto model = mf.load_model("serve");
    if (!model) return 1;
    return *mf.fit_print_if_asked("serve", model);
  }
  if (many) {
    for (const std::string& v : model_values) {
      auto spec = serve::parse_model_flag(v);
      if (!spec.ok()) return fail("serve", "-m: " + spec.error().message, 2);
      models.push_back(std::move(*spec));
    }
    if (!models_dir.empty()) {
      auto found = serve::models_in_dir(models_dir);
      if (!found.ok()) return fail("serve", found.error().message);
      models.insert(models.end(), found->begin(), found->end());
    }
    for (serve::ModelSpec& m : models) m.sleep_idle_seconds = std::max(0, sleep_idle);
    if (!models_preset.empty()) {
      auto text = read_text_file(models_preset);
      if (!text.ok()) return fail("serve", "--models-preset: " + text.error().message);
      if (auto st = serve::apply_models_preset(*text, models_preset, models); !st.ok())
        return fail("serve", "--models-preset: " + st.error().message);
    }
    if (auto st = serve::check_models(models); !st.ok()) return fail("serve", st.error().message);
    if (!mmproj.empty()) return fail("serve", "--mmproj serves one model; it cannot be given to several", 2);
  }
  if (!pooling.empty()) {
    if (auto pp = parse_pooling(pooling); !pp.ok())
      return fail("serve", "--pooling: " + pp.error().message, 2);
  }
  if (struct stat st {}; !media_path.empty() && (stat(media_path.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)))
    return fail("serve", "--media-path: '" + media_path + "' is not a folder", 2);

  serve::ServerOptions opt;
  opt.n_parallel = parallel;
  if (kv_unified && no_kv_unified) return fail("serve", "-kvu and -no-kvu contradict each other", 2);
  if (kv_unified || no_kv_unified) opt.kv_unified = kv_unified;
  opt.kv_unified_per_slot = kv_unified_per_slot;
  opt.queue_limit = queue;
  opt.api_key = api_key;
  opt.n_threads = mf.threads;
  opt.device = mf.device;
  opt.split = mf.split;
  opt.sim_devices = mf.device_options().sim;
  opt.vulkan = mf.device_options().vulkan;
  opt.budgets = mf.budgets;
  opt.sim_shared_dir = mf.sim_shared_dir;
  opt.swap_dir = mf.swap_dir;
  opt.no_mmap = mf.no_mmap;
  opt.mlock = mf.mlock;
  opt.arbiter_dir = arbiter_dir;
  opt.context = mf.context;
  opt.embeddings = embeddings;
  opt.pooling = pooling;
  opt.mmproj = mmproj;
  opt.mmproj_device = encoder_device.resolved();
  opt.media_path = media_path;
  opt.sleep_idle_seconds = sleep_idle;
  opt.models = models;
  opt.models_max = models_max;
  opt.models_autoload = models_autoload && !no_models_autoload;
  opt.residency_timeout_seconds = residency_timeout;
  opt.timeout_seconds = timeout;
  opt.max_body = max_body;
  opt.reuse_port = reuse_port;
  opt.cors_origins = cors_origins;
  opt.speculative = spf.resolved();
  opt.draft_model = spf.draft_model_path;
  opt.draft_placement = spf.placement;
  opt.reasoning_format = reasoning_format;
  opt.enable_thinking = *enable_thinking;
  opt.reasoning_budget = reasoning.budget;
  opt.reasoning_budget_message = reasoning.budget_message;
  opt.chat_template_kwargs = template_kwargs;
  opt.grammar = std::move(constraint->gbnf);
  opt.json_schema = std::move(constraint->json_schema);
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
  raise_open_file_limit();

  serve::Server server(opt);
  auto bound = server.listen(host, port);
  if (!bound.ok()) return fail("serve", bound.error().message);
  if (many) {
    std::fprintf(stderr, "kiln serve: listening on http://%s:%d (%zu models)\n", host.c_str(), *bound,
                 models.size());
    if (const Status st = server.attach_models(); !st.ok()) return fail("serve", st.error().message);
    std::fprintf(stderr, "kiln serve: ready: %zu models, each loaded on its first request\n", models.size());
  }
  if (!many) {
    std::fprintf(stderr, "kiln serve: listening on http://%s:%d (loading the model)\n", host.c_str(), *bound);
    // The embedded model when no -m was given; a warning when a slot's context exceeds the model's
    // training context.
    auto model = mf.model_path.empty() ? load_default_model() : Model::load(mf.model_path);
    if (!model.ok()) return fail("serve", model.error().message);
    warn_beyond_training_context("serve",
                                 serve::n_ctx_per_slot(serve::server_context_size(opt, (*model)->hparams()),
                                                       serve::engine_options(opt)),
                                 **model);
    if (const Status st = server.attach(std::move(*model)); !st.ok()) return fail("serve", st.error().message);
    const std::string sleeps =
        sleep_idle > 0 ? ", sleeping after " + std::to_string(sleep_idle) + " s idle" : "";
    const std::string spec = opt.speculative.enabled() ? ", speculative decoding" : "";
    const serve::EngineOptions slots = serve::engine_options(opt);
    std::fprintf(stderr, "kiln serve: ready: %s, %d slots (%s, %d tokens each)%s%s%s\n",
                 server.info()->name.c_str(), slots.n_slots, slots.kv_unified ? "one KV pool" : "split KV",
                 server.info()->n_ctx_slot, server.info()->vision ? ", vision (--mmproj)" : "", spec.c_str(),
                 sleeps.c_str());
  }
  int sig = 0;
  sigwait(&signals, &sig);
  std::fprintf(stderr, "kiln serve: %s, shutting down\n", signal_name(sig));
  // The stop runs beside this thread, which watches for a second signal and for kStopLimit.
  std::atomic<bool> stopped{false};
  std::thread stopper([&] {
    server.stop();
    stopped = true;
  });
  const auto deadline = std::chrono::steady_clock::now() + kStopLimit;
  while (!stopped) {
    timespec wait{0, 20'000'000};
    if (const int again = sigtimedwait(&signals, nullptr, &wait); again > 0) {
      std::fprintf(stderr, "kiln serve: %s again, exiting now\n", signal_name(again));
      _exit(1);
    }
    if (std::chrono::steady_clock::now() > deadline) {
      std::fprintf(stderr, "kiln serve: the shutdown takes longer than %lld s, exiting now\n",
                   static_cast<long long>(kStopLimit.count()));
      _exit(1);
    }
  }
  stopper.join();
  return 0;
}

}  // namespace

KILN_COMMAND(serve, "OpenAI-compatible HTTP server (/v1/completions, /v1/chat/completions, ...)", run_serve);

}  // namespace kiln::cli
