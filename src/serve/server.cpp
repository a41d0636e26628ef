#include "serve/server.h"

#include "serve/http.h"
#include "serve/api_json.h"
#include "serve/server_state.h"

namespace kiln::serve {

Server::Server(ServerOptions options) : opt_(std::move(options)), http_(std::make_unique<httplib::Server>()) {
  // Each streaming client holds an HTTP thread while it waits: enough for every slot and queue.
  const size_t n_threads = static_cast<size_t>(opt_.n_parallel + opt_.queue_limit + 4);
  http_->new_task_queue = [n_threads] { return new httplib::ThreadPool(n_threads); };
  routes();
}

Server::~Server() { stop(); }

std::shared_ptr<ServerState> Server::ready() const {
  std::lock_guard lock(mutex_);
  return state_;
}

Result<int> Server::listen(const std::string& host, int port) {
  int bound = port;
  if (port == 0) {
    bound = http_->bind_to_any_port(host);
    if (bound < 0) return make_error("serve: cannot bind ", host, " to any port");
  } else if (!http_->bind_to_port(host, port)) {
    return make_error("serve: cannot bind ", host, ":", port, " (in use, or not an address of this machine)");
  }
  thread_ = std::thread([this] { http_->listen_after_bind(); });
  return bound;
}

Status Server::attach(std::shared_ptr<const Model> model) {
  auto st = std::make_shared<ServerState>();
  st->model = model;
  const auto& tok = model->tokenizer();
  std::string source = opt_.chat_template_source;
  if (source.empty()) {
    if (auto t = model->file().get_string("tokenizer.chat_template"); t.ok()) source = *t;
  }
  if (source.empty()) {
    st->chat_template = ChatTemplate::chatml();
  } else {
    auto t = ChatTemplate::parse(source);
    if (!t.ok()) return make_error("serve: the chat template: ", t.error().message);
    st->chat_template = std::move(*t);
  }
  if (tok.bos() >= 0) {
    if (auto p = tok.token_to_piece(tok.bos(), true); p.ok()) st->bos_text = *p;
  }
  if (tok.eos() >= 0) {
    if (auto p = tok.token_to_piece(tok.eos(), true); p.ok()) st->eos_text = *p;
  }
  if (opt_.n_parallel < 1 || opt_.n_parallel > kMaxSequences)
    return make_error("serve: --parallel ", opt_.n_parallel, " is outside 1..", kMaxSequences);
  st->cpu = std::make_unique<CpuEngine>(opt_.n_threads);
  KILN_ASSIGN_OR_RETURN(st->ctx, Context::create(model, st->cpu->backend, opt_.context));
  if (st->ctx->n_ctx() / opt_.n_parallel < 2)
    return make_error("serve: a context of ", st->ctx->n_ctx(), " tokens is too small for ", opt_.n_parallel,
                      " slots");
  st->engine = std::make_unique<Engine>(*st->ctx, opt_.n_parallel, opt_.queue_limit);
  std::lock_guard lock(mutex_);
  state_ = std::move(st);
  return {};
}

void Server::stop() {
  if (auto st = ready()) st->engine->stop();  // ends every generation: their handlers return
  http_->stop();
  if (thread_.joinable()) thread_.join();
}

void Server::routes() {
  http_->set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
    if (opt_.api_key.empty() || req.path == "/health" || req.path == "/v1/health")
      return httplib::Server::HandlerResponse::Unhandled;
    if (req.get_header_value("Authorization") == "Bearer " + opt_.api_key)
      return httplib::Server::HandlerResponse::Unhandled;
    send_error(res, {401, "invalid or missing API key (send 'Authorization: Bearer KEY')"});
    return httplib::Server::HandlerResponse::Handled;
  });
  auto health = [this](const httplib::Request&, httplib::Response& res) {
    if (!ready()) return send_error(res, {503, "the model is loading"});
    send_json(res, {{"status", "ok"}});
  };
  http_->Get("/health", health);
  http_->Get("/v1/health", health);
  const RouteContext rc{opt_, [this] { return ready(); }};
  add_info_routes(*http_, rc);
  add_token_routes(*http_, rc);
  add_completion_routes(*http_, rc);
  add_embedding_routes(*http_, rc);
}

}  // namespace kiln::serve
